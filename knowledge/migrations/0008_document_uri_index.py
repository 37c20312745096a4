"""An index on each item's document uri (`source #> '{document,uri}'`): a document's items were found by reading the
whole table, twice or more per file read (a zip of 2,000 Markdown files read again into a base holding only their
items: 20.3 s, 12 s of it those reads; 10.3 s with the index; BENCHMARKS.md "Writes" for a 100k base). Built
concurrently: saves and reports go on while it builds."""
import django.db.models.fields.json
from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ('knowledge', '0007_verbose_names'),
        ('resources', '0002_verbose_names'),
    ]

    operations = [
        AddIndexConcurrently(
            model_name='knowledge',
            index=models.Index(django.db.models.fields.json.KeyTransform('uri', django.db.models.fields.json.KeyTransform('document', 'source')), name='knowledge_document_uri'),
        ),
    ]
