"""A document's items are found through the index on their document uri (knowledge_document_uri), not by reading
every item: every Markdown, CSV and document reading looks its file's items up (`ingest.chunks.items_of`)."""
import pytest
from django.db import connection

from ingest.chunks import items_of
from ingest.importer import restore_hashes
from tests.callers import acting

pytestmark = pytest.mark.django_db


def plan(queryset) -> str:
    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # a small test table would be read whole anyway
        cursor.execute("EXPLAIN " + sql, params)
        return "\n".join(row[0] for row in cursor.fetchall())


@pytest.mark.parametrize("lookup", [
    lambda: items_of("handbook.zip/ops/deploy.md", "markdown", ["team:a"]),
    lambda: items_of("handbook.zip/ops/deploy.md", "markdown"),
    lambda: restore_hashes(acting("agent:a", readable_scopes=("team:a",)), "tips.csv", "csv", ["team:a"]),
], ids=["a document in its scopes", "a document in any scopes", "a csv's rows read before"])
def test_a_documents_items_are_looked_up_through_the_uri_index(lookup):
    assert "knowledge_document_uri" in plan(lookup())
