"""Stage 1, keyword side: PostgreSQL full text over task, content and tags.

Documents: task (weight A), content (B) and tag values (A), Chinese
pre-segmented, stemmed with the 'english' config; plus identifier tokens
(`undetected_chromedriver`, `E1101`) stored verbatim with `array_to_tsvector`,
since PostgreSQL's parser would split them at `_`, `-` and `/`.

Queries OR their lexemes, so an item matching more query words ranks higher
without every word being required; ranked by `ts_rank` with length
normalisation (flag 1: divide by 1 + log(length)). The tsquery is built from
quoted lexemes and cast, never parsed from user text.
"""
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.search import SearchRank, SearchVector, SearchVectorCombinable, SearchVectorField
from django.db import connection
from django.db.models import BooleanField, F, Func, TextField, Value
from django.db.models.expressions import RawSQL

from knowledge.search.text import identifiers, segment

RANK_NORMALISATION = 1
MAX_QUERY_LEXEMES = 64


class _IdentifierVector(SearchVectorCombinable, Func):
    """Identifier tokens as lexemes, verbatim, weight A."""

    template = "setweight(array_to_tsvector(%(expressions)s), 'A')"
    output_field = SearchVectorField()


class TsMatch(Func):
    """`document @@ query` as a boolean expression usable in filter()."""

    arg_joiner = " @@ "
    template = "(%(expressions)s)"
    output_field = BooleanField()


def document_expression(*, task: str, content: str, tags: dict):
    """The tsvector expression to store in `Knowledge.search_document`."""
    tag_text = " ".join(str(v) for v in (tags or {}).values())
    names = identifiers(f"{task}\n{content}\n{tag_text}")
    words = (
        SearchVector(Value(segment(task)), config="english", weight="A")
        + SearchVector(Value(segment(content)), config="english", weight="B")
        + SearchVector(Value(segment(tag_text)), config="english", weight="A")
    )
    if not names:
        return words
    return words + _IdentifierVector(Value(names, output_field=ArrayField(TextField())))


def _quote(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def build_query(text: str) -> str | None:
    """The tsquery text for a search string (`'a' | 'b'`); None when it has no words."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT tsvector_to_array(to_tsvector('english', %s))", [segment(text)])
        (lexemes,) = cursor.fetchone()
    lexemes = list(dict.fromkeys([*identifiers(text), *(lexemes or [])]))[:MAX_QUERY_LEXEMES]
    return " | ".join(_quote(lex) for lex in lexemes) or None


def keyword_candidates(queryset, *, text: str, limit: int) -> list[tuple[str, float]]:
    """(id, rank) of the best keyword matches within `queryset`, best first."""
    query_text = build_query(text)
    if not query_text:
        return []
    tsquery = RawSQL("%s::tsquery", [query_text])
    rows = (
        queryset.filter(TsMatch(F("search_document"), tsquery))
        .annotate(keyword_rank=SearchRank(F("search_document"), tsquery, normalization=Value(RANK_NORMALISATION)))
        .order_by("-keyword_rank", "id")
        .values_list("id", "keyword_rank")[:limit]
    )
    return [(item_id, float(rank)) for item_id, rank in rows]
