"""Stage 1, keyword side: PostgreSQL full text over task, content and tags.

Documents: task (weight A), content (B) and tag values (A), Chinese
pre-segmented, stemmed with the 'english' config; plus identifier tokens
(`undetected_chromedriver`, `E1101`) stored verbatim with `array_to_tsvector`,
since PostgreSQL's parser would split them at `_`, `-` and `/`.

Queries OR their lexemes, so an item matching more query words ranks higher
without every word being required, and are ranked by BM25 (see
`keyword_candidates`). The tsquery is built from quoted lexemes and cast,
never parsed from user text.
"""
import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings
from django.contrib.postgres.search import SearchVectorField
from django.db import connection
from django.db.models import BooleanField, F, Func
from django.db.models.expressions import RawSQL

from core.compiled import statement_key
from core.estimates import common_shares, estimated_rows
from knowledge.search.text import identifiers, informativeness, segment, segment_many

MAX_QUERY_LEXEMES = 64
BM25_K1 = 1.2
BM25_B = 0.75
TITLE_BOOST = 2
# ts_rank_cd's weights {D, C, B, A}, scaled back by TITLE_BOOST: an occurrence of weight A counts TITLE_BOOST, another 1
_TF_WEIGHTS = [1 / TITLE_BOOST] * 3 + [1.0]

logger = logging.getLogger(__name__)


class TsMatch(Func):
    """`document @@ query` as a boolean expression usable in filter()."""

    arg_joiner = " @@ "
    template = "(%(expressions)s)"
    output_field = BooleanField()


# The stored document from its parts: the segmented task, content and tag text (`%s`-free SQL expressions
# of type text) and the identifier tokens (a text[] expression). A single save fills it with one item's
# parameters (`document_expression`), the bulk path with the columns of its JSON records (`knowledge.bulk`), so
# both store the same tsvector. Concatenating an empty identifier vector changes nothing.
DOCUMENT_SQL = (
    "setweight(to_tsvector('english'::regconfig, COALESCE({task}, '')), 'A')"
    " || setweight(to_tsvector('english'::regconfig, COALESCE({content}, '')), 'B')"
    " || setweight(to_tsvector('english'::regconfig, COALESCE({tags}, '')), 'A')"
    " || setweight(array_to_tsvector({names}), 'A')"
)


def document_parts(*, task: str, content: str, tags: dict) -> tuple[str, str, str, list[str]]:
    """What `DOCUMENT_SQL` is computed from: the segmented task, content and tag values, and the identifiers."""
    return document_parts_many([(task, content, tags)])[0]


def document_parts_many(items: Sequence[tuple[str, str, dict]]) -> list[tuple[str, str, str, list[str]]]:
    """`document_parts` of each (task, content, tags), their texts segmented together (`text.segment_many`)."""
    tag_texts = [" ".join(str(v) for v in (tags or {}).values()) for _, _, tags in items]
    segmented = iter(segment_many([part for (task, content, _), tag_text in zip(items, tag_texts)
                                   for part in (task, content, tag_text)]))
    return [(next(segmented), next(segmented), next(segmented), identifiers(f"{task}\n{content}\n{tag_text}"))
            for (task, content, _), tag_text in zip(items, tag_texts)]


def document_expression(*, task: str, content: str, tags: dict):
    """The tsvector expression to store in `Knowledge.search_document`."""
    sql = DOCUMENT_SQL.format(task="%s", content="%s", tags="%s", names="%s::text[]")
    return RawSQL(sql, document_parts(task=task, content=content, tags=tags), output_field=SearchVectorField())


def _quote(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def query_lexemes(text: str) -> list[str]:
    """The distinct lexemes of a search string: identifiers whole, words stemmed."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT tsvector_to_array(to_tsvector('english', %s))", [segment(text)])
        (lexemes,) = cursor.fetchone()
    return list(dict.fromkeys([*identifiers(text), *(lexemes or [])]))[:MAX_QUERY_LEXEMES]


def _tsquery(lexemes, operator: str) -> str:
    """The tsquery text joining `lexemes` with `operator` (`'a' | 'b'`: any of them; `&`: every one)."""
    return f" {operator} ".join(_quote(lex) for lex in lexemes)


def holding_every_word(text: str) -> TsMatch | None:
    """A filter() condition: the item's keyword document holds every word of `text`, read as the keyword search
    reads it (Chinese segmented, English stemmed, identifiers whole), through the document's GIN index; None when
    `text` has no words."""
    lexemes = query_lexemes(text)
    if not lexemes:
        return None
    return TsMatch(F("search_document"), RawSQL("%s::tsquery", [_tsquery(lexemes, "&")]))


def keyword_candidates(queryset, *, text: str, limit: int, statistics=None, leave_out: str | None = None) -> list[tuple[str, float]]:
    """(id, score in [0, 1]) of the best keyword matches within `queryset`, best first.

    The score is BM25 divided by the most the query could score (every
    lexeme matched with saturated frequency): the share of the query's
    information an item matches. Unlike dividing by the best hit, this keeps
    an incidental match (a lone number in a query written in another
    language) small, so fusion can trust a strong keyword match without
    being swayed by a weak one. A query word no item in the base holds
    counts in that ceiling as a word rarer than any it holds, scaled by how
    informative it is in general use (`text.informativeness`: an everyday
    Chinese word not at all): "sourdough starter" asked of a base that only
    knows "starter" matches about half of the query, not all of its known
    part.

    Okapi BM25 over the stored tsvectors: PostgreSQL's own ts_rank has no
    inverse document frequency, so a common word counts as much as a rare
    one. The statistics (item count, mean length, document frequencies) are
    those of `statistics` (the caller's whole visible base; `queryset` when
    not given), in one pass: a base scores the same whatever other scopes
    hold, no other scope's words show through its scores, and a filter that
    narrows the search does not change how rare a word is. `leave_out`: the id
    of an item whose own document the statistics do not count, as if it were
    not in `statistics` (an item's neighbours are scored against the rest of
    its audience: the audience stays one base, counted once and kept, for
    every item of it, instead of a base per item, counted whole on every
    call). Term frequency is
    the lexeme's position count, weight-A occurrences (task, tags) counting
    TITLE_BOOST times; document length is the number of distinct lexemes.

    Scoring reads each candidate's whole document, so which items are scored
    is bounded (`scored_lexemes`): those holding the query's rarer words,
    rarest first, while those words hold at most SCORE_BUDGET items
    together. In a base where every query word is held by fewer items than
    that (any base under SCORE_BUDGET items) every item matching a query
    word is scored; in a large one, an item holding only the query's
    commonest words ("effect" and "use" in a base of papers; stop words
    are not lexemes at all) is left out: an approximation, since a full
    ranking could place such an item in the list's tail, with a small share
    of the query's information. BENCHMARKS.md measures what it changes.
    """
    lexemes = query_lexemes(text)
    if not lexemes:
        return []
    base = queryset if statistics is None else statistics
    total, avg_length, frequencies = _base_statistics(base, lexemes)
    if leave_out is not None:
        total, avg_length, frequencies = _without(base, leave_out, total, avg_length, frequencies)
    idf = {lex: math.log(1 + (total - df + 0.5) / (df + 0.5)) for lex, df in frequencies.items() if df}
    if not idf:
        return []
    unseen_idf = math.log(1 + (total + 0.5) / 0.5)
    information = sum(idf.values()) + sum(unseen_idf * informativeness(lex) for lex in lexemes if lex not in idf)
    matched = _tsquery(scored_lexemes(frequencies), "|")
    matching = queryset.filter(TsMatch(F("search_document"), RawSQL("%s::tsquery", [matched])))
    # .order_by(): the model's default ordering would sort every matching row inside the subquery for nothing
    inner_sql, inner_params = matching.order_by().values_list("id", "search_document").query.sql_with_params()
    # Each candidate's document is read once (`|| ''`: detoasted into the row, and kept there by OFFSET 0; most are
    # stored compressed or out of line, and were read again at each use). A matched word's term frequency is
    # ts_rank_cd's cover density for the word alone: the sum of its occurrences' weights, weight A counted
    # TITLE_BOOST times as much as the others (its weight array is {D, C, B, A}, each at most 1, hence the scale);
    # an identifier stored without positions counts once. Computed in C, it replaces unnesting the document.
    sql = f"""
        SELECT c.id,
               SUM(q.idf * (t.tf * %s::float8) / (t.tf + %s::float8 * (1 - %s::float8 + %s::float8 * c.length / %s::float8))) AS score
        FROM (SELECT m.id, m.doc || ''::tsvector, length(m.doc) FROM ({inner_sql}) AS m(id, doc) OFFSET 0) AS c(id, doc, length)
        JOIN unnest(%s::tsquery[], %s::float8[]) AS q(word, idf) ON c.doc @@ q.word
        CROSS JOIN LATERAL (
            SELECT GREATEST(%s::float8 * ts_rank_cd(%s::float4[], c.doc, q.word, 0), 1) AS tf
            OFFSET 0  -- stays a subquery: computed once, not once per use in SUM
        ) AS t
        GROUP BY c.id
        ORDER BY score DESC, c.id
        LIMIT %s
    """
    params = [
        BM25_K1 + 1, BM25_K1, BM25_B, BM25_B, max(avg_length, 1.0), *inner_params,
        [_quote(lex) for lex in idf], list(idf.values()), TITLE_BOOST, _TF_WEIGHTS, limit,
    ]
    ceiling = information * (BM25_K1 + 1) * TITLE_BOOST
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [(item_id, float(score) / ceiling) for item_id, score in cursor.fetchall()]


# At most this many items have their documents read per search (the sum of the chosen words' document
# frequencies). On SciFact (5,183 abstracts, 300 claims) 1,000 leaves keyword nDCG@10 and recall@100
# unchanged and cuts the time per query 5.7x; BENCHMARKS.md ("Search at scale") has the grid.
SCORE_BUDGET = 1_000


def scored_lexemes(frequencies: dict[str, int]) -> list[str]:
    """The query lexemes whose holders are scored: rarest first while together they hold ≤ SCORE_BUDGET items
    (always the rarest one held at all)."""
    held = sorted((df, lex) for lex, df in frequencies.items() if df)
    chosen, holders = [], 0
    for df, lex in held:
        if chosen and holders + df > SCORE_BUDGET:
            break
        chosen.append(lex)
        holders += df
    return chosen


# Word statistics of a large base barely move from one save to the next, and counting them scans the
# whole base: a base of at least STATISTICS_CACHE_MIN_ITEMS items keeps its item count and mean length
# for STATISTICS_TTL seconds (five minutes), and each word's document frequency (counted through the GIN index when
# first asked) as long. A smaller base is counted exactly on every search: it is cheap.
# When the five minutes are up, the search that finds the entry expired is answered from it and starts a thread that
# counts the base again (a pass over the whole base, longer the more items and query words), one such thread per
# process at a time; the searches meanwhile are answered from the expired entry, and the count replaces it (with
# the words of the search that started it; other words are new words again). An entry left expired for another
# STATISTICS_TTL (no search of the base in that time) is counted again by the search, as a base first asked is.
# The thread has its own connection (from the pool, in a web process) and closes it; it sees committed rows only,
# which is why tests, whose rows stay in their transaction, count inline (KNOWHUB_STATISTICS_REFRESH_IN_BACKGROUND).
# In a large base a new word's holders are counted up to HOLDERS_COUNTED: counting reads each holder's row to apply
# the base's filters (a word held by a thousand of 100,000 items cost 10-17 ms, its rows read from the disk cache).
# A word held by more is given the share of the table ANALYZE found holding it (`core.estimates.common_shares`, per
# tsvector lexeme, read once per STATISTICS_TTL) times the base's size, and is counted in full when ANALYZE has no
# share for it or one that would make it rarer in the base than counted (a word common in this base only). Such a
# word's holders are scored only when it is the query's rarest word (scored_lexemes), and its weight is small, so an
# estimate moves neither which items are scored nor much of their score.
STATISTICS_CACHE_MIN_ITEMS = 5_000
STATISTICS_TTL = 300.0
STATISTICS_CACHE_BASES = 64
HOLDERS_COUNTED = 100
LENGTH_SAMPLE = 5_000  # documents whose mean length stands for a large base's until it is counted in full
_statistics: OrderedDict = OrderedDict()  # base key -> _Statistics
_refreshing: dict = {}  # base key -> the thread counting it again
SMALL_BASES = 1_024
_small: OrderedDict = OrderedDict()  # base key -> until when it is known to be small (counted in one pass)
_statistics_lock = threading.Lock()


@dataclass
class _Statistics:
    expires: float
    total: int
    average: float
    frequencies: dict[str, int]


def _base_statistics(queryset, lexemes: list[str]) -> tuple[int, float, dict[str, int]]:
    """(items, mean document length, lexeme -> how many items hold it) over `queryset`."""
    inner_sql, inner_params = queryset.order_by().values_list("search_document").query.sql_with_params()  # no sort of the base
    key = statement_key(inner_sql, inner_params)
    now = time.monotonic()
    with _statistics_lock:
        cached = _statistics.get(key)
        if cached is not None and cached.expires <= now:
            if now < cached.expires + STATISTICS_TTL and settings.KNOWHUB_STATISTICS_REFRESH_IN_BACKGROUND:
                _refresh_in_background(key, queryset.model, inner_sql, inner_params, lexemes)  # served meanwhile
            else:
                cached = None  # too old to serve (or tests): counted now
    if cached is None:
        # A base first asked for in this process: with the background refresh on, its mean length is taken from its
        # first LENGTH_SAMPLE documents, and the exact count is started at once in the background (the entry is
        # remembered as expired, so it is served until that count replaces it).
        sampled = settings.KNOWHUB_STATISTICS_REFRESH_IN_BACKGROUND
        total, average, frequencies = _count_base(queryset.model, inner_sql, inner_params, lexemes, sampled=sampled)
        approximate = sampled and total > LENGTH_SAMPLE
        _remember(key, now - STATISTICS_TTL if approximate else now, total, average, frequencies)
        if approximate:
            with _statistics_lock:
                _refresh_in_background(key, queryset.model, inner_sql, inner_params, lexemes)
        return total, average, frequencies
    missing = [lex for lex in lexemes if lex not in cached.frequencies]
    if missing:
        counted = _frequencies_of_new_words(queryset.model, inner_sql, inner_params, missing, total=cached.total)
        with _statistics_lock:
            cached.frequencies.update(counted)
    return cached.total, cached.average, {lex: cached.frequencies[lex] for lex in lexemes}


def _remember(key, counted_at: float, total: int, average: float, frequencies: dict[str, int]) -> None:
    """Keep a large base's statistics counted at `counted_at` (a base that shrank below the size forgets them)."""
    with _statistics_lock:
        if total < STATISTICS_CACHE_MIN_ITEMS:
            _statistics.pop(key, None)
            return
        _statistics[key] = _Statistics(counted_at + STATISTICS_TTL, total, average, dict(frequencies))
        _statistics.move_to_end(key)
        while len(_statistics) > STATISTICS_CACHE_BASES:
            _statistics.popitem(last=False)


def _refresh_in_background(key, model, inner_sql: str, inner_params, lexemes: list[str]) -> None:
    """Start the thread that counts the base `key` again, unless one is at it. Called holding _statistics_lock.
    One such thread per process at a time, whatever the base: each holds a database connection (in a web process one
    of the pool's, which requests and /healthz need), and a base waiting for its turn is served its expired entry."""
    if any(thread.is_alive() for thread in _refreshing.values()):  # (after a fork, the parent's are not alive in the child)
        return
    thread = threading.Thread(target=_refresh, args=(key, model, inner_sql, inner_params, lexemes),
                              name="keyword-statistics", daemon=True)
    _refreshing[key] = thread
    thread.start()


def _refresh(key, model, inner_sql: str, inner_params, lexemes: list[str]) -> None:
    try:
        started = time.monotonic()
        _remember(key, started, *_count_base(model, inner_sql, inner_params, lexemes))
    except Exception:  # noqa: BLE001 - the expired entry is served on; the next search of the base starts another
        logger.warning("counting a base's keyword statistics again failed", exc_info=True)
    finally:
        connection.close()  # this thread's own connection (back to the pool in a web process)
        with _statistics_lock:
            if _refreshing.get(key) is threading.current_thread():
                del _refreshing[key]


def _without(queryset, item_id: str, total: int, average: float, frequencies: dict[str, int]) -> tuple[int, float, dict[str, int]]:
    """The statistics of `queryset` less the item `item_id`'s own document (unchanged when it is not in `queryset`).

    A large base's figures may have been counted before the item was saved (kept up to STATISTICS_TTL): the words the
    item holds that are rare there (fewer than HOLDERS_COUNTED holders) are counted again now, the item among their
    holders, before it is taken off, so a word the item shares with one other item still counts that one. A commoner
    word's count, the item count and the mean length do not move measurably by one item."""
    one_sql, one_params = queryset.filter(pk=item_id).order_by().values_list("search_document").query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT length(d), tsvector_to_array(ts_delete(d, tsvector_to_array(ts_delete(d, %s::text[]))))"
                       f" FROM ({one_sql}) AS one(d)", [list(frequencies), *one_params])
        row = cursor.fetchone()
    if row is None:
        return total, average, frequencies
    length, held = row[0] or 0, set(row[1] or ())  # held: the given words the item's document holds
    frequencies = dict(frequencies)
    if rare := sorted(lex for lex in held if frequencies[lex] < HOLDERS_COUNTED):
        inner_sql, inner_params = queryset.order_by().values_list("search_document").query.sql_with_params()
        frequencies.update(_count_holders(inner_sql, inner_params, rare, up_to=HOLDERS_COUNTED))
    rest = max(total - 1, 0)
    return (rest, (average * total - length) / rest if rest else 0.0,
            {lex: max(df - (lex in held), 0) for lex, df in frequencies.items()})


def _count_base(model, inner_sql: str, inner_params, lexemes: list[str], *,
                sampled: bool = False) -> tuple[int, float, dict[str, int]]:
    """Items, mean length and every lexeme's document frequency. In a table too small to hold a large base, one pass
    over the base counts them all. Otherwise the pass counts the items and their mean length only, and a large base's
    words are counted as new words are (`_frequencies_of_new_words`: through the GIN index, up to HOLDERS_COUNTED,
    then ANALYZE's shares): matching each of up to 64 words against each of 100,000 documents took 1-3.5 s (the
    first search of a process, each five-minute recount), the items and their length ~0.3 s. `sampled`: the mean
    length from the base's first LENGTH_SAMPLE documents, not from every one (at 100,000 items 14 ms against 300,
    the count alone 22 ms; the mean within 0.2% of the exact one there)."""
    key, now = statement_key(inner_sql, inner_params), time.monotonic()
    if _small.get(key, 0.0) > now or (estimated_rows(model) or 0) < STATISTICS_CACHE_MIN_ITEMS:
        return _count_all(inner_sql, inner_params, lexemes)
    total, average = (_size_and_sampled_length(inner_sql, inner_params) if sampled
                      else _count_all(inner_sql, inner_params, [])[:2])
    if total < STATISTICS_CACHE_MIN_ITEMS:  # a small base of a large table: its words counted exactly, as it is small,
        with _statistics_lock:  # and, for STATISTICS_TTL, in one pass from the start
            _small[key] = now + STATISTICS_TTL
            _small.move_to_end(key)
            while len(_small) > SMALL_BASES:
                _small.popitem(last=False)
        return _count_all(inner_sql, inner_params, lexemes)
    return total, average, _frequencies_of_new_words(model, inner_sql, inner_params, lexemes, total=total)


def _size_and_sampled_length(inner_sql: str, inner_params) -> tuple[int, float]:
    """The base's items, counted (no document read), and the mean length of its first LENGTH_SAMPLE documents."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT (SELECT count(*) FROM ({inner_sql}) AS base(d)), "
            f"(SELECT coalesce(avg(length(d)), 0) FROM ({inner_sql} LIMIT {int(LENGTH_SAMPLE)}) AS first(d))",
            [*inner_params, *inner_params],
        )
        total, average = cursor.fetchone()
    return int(total), float(average)


def _count_all(inner_sql: str, inner_params, lexemes: list[str]) -> tuple[int, float, dict[str, int]]:
    """Items, mean length and each lexeme's document frequency, in one pass over the base."""
    counts = "".join(", count(*) FILTER (WHERE d @@ %s::tsquery)" for _ in lexemes)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*), coalesce(avg(length(d)), 0){counts} FROM ({inner_sql}) AS base(d)",
            [*(_quote(lex) for lex in lexemes), *inner_params],
        )
        total, average, *row = cursor.fetchone()
    return int(total), float(average), dict(zip(lexemes, (int(c) for c in row)))


def _frequencies_of_new_words(model, inner_sql: str, inner_params, lexemes: list[str], *, total: int) -> dict[str, int]:
    """Each lexeme's document frequency in a large base of `total` items: counted up to HOLDERS_COUNTED, a commoner
    word's estimated from ANALYZE's lexeme shares, and counted in full when ANALYZE has no share for it or one that
    would make it rarer in the base than counted (a word common in this base only). In a base of at least half the
    table a word ANALYZE's shares make common (HOLDERS_COUNTED or more) is not counted at all: a GIN index builds
    its whole bitmap before `LIMIT` stops the count, 10-100 ms a common word at 1M items."""
    def common_by_shares(words) -> dict[str, int]:  # those ANALYZE's shares put at HOLDERS_COUNTED or more here
        shares = _lexeme_shares(model)
        return {lex: n for lex in words if lex in shares and (n := round(shares[lex] * total)) >= HOLDERS_COUNTED}

    # most of the table: ANALYZE's shares are nearly the base's own, and a word they make common is not counted
    known = common_by_shares(lexemes) if total * 2 >= (estimated_rows(model) or 0) else {}
    counted = _count_holders(inner_sql, inner_params, [lex for lex in lexemes if lex not in known], up_to=HOLDERS_COUNTED)
    if common := [lex for lex, n in counted.items() if n >= HOLDERS_COUNTED]:
        estimated = common_by_shares(common)
        counted.update(estimated)
        if unknown := [lex for lex in common if lex not in estimated]:
            counted.update(_count_holders(inner_sql, inner_params, unknown))
    return {**counted, **known}


_shares: dict = {}  # model -> (expires, {lexeme: share of the table's rows holding it})


def _lexeme_shares(model) -> dict[str, float]:
    """ANALYZE's common lexemes of `model`'s keyword documents, read at most once per STATISTICS_TTL per process."""
    now = time.monotonic()
    expires, shares = _shares.get(model, (0.0, {}))
    if expires <= now:
        shares = common_shares(model, "search_document")
        _shares[model] = (now + STATISTICS_TTL, shares)
    return shares


def _count_holders(inner_sql: str, inner_params, lexemes: list[str], *, up_to: int | None = None) -> dict[str, int]:
    """Each lexeme's document frequency in the base (at most `up_to`), one index lookup each (a rare word costs
    almost nothing)."""
    if not lexemes:
        return {}
    held = f"SELECT 1 FROM ({inner_sql}) AS base(d) WHERE d @@ %s::tsquery" + (f" LIMIT {int(up_to)}" if up_to else "")
    counts = ", ".join(f"(SELECT count(*) FROM ({held}) AS held)" for _ in lexemes)
    params = [value for lex in lexemes for value in (*inner_params, _quote(lex))]
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {counts}", params)
        return dict(zip(lexemes, (int(c) for c in cursor.fetchone())))
