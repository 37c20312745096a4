"""The agent search's result cache: a repeated search skips the engine until the knowledge table changes.

What is kept: the hits of an `engine.search` run (ids, relevance, quality score, explanation) and its notes,
per web process, in a bounded LRU (MAX_ENTRIES) keyed by (generation, every argument of the run, the
settings that shape it). Not kept: the item rows. The caller reads them again (`hit_items`), and the
reply's resource links, conflict flags and search log are made per request, so only the ranking is reused.
Only the agent search (`knowledge_search`) uses it; the playground, the curation list and `ranking_eval`
call the engine directly, so they always show a real run.

The engine reads one table, `knowledge_knowledge` (text, keyword documents, vectors, scopes, status,
counters; no relative-time filter exists). Its output is a function of that table, the arguments and the
settings (embedder, routing): the arguments and settings are the key. The table's version is the
**generation**, the PostgreSQL sequence `knowhub_search_generation`, read once per search
(`knowhub_search_generation()`, migration 0003), so every process agrees on it.

Who advances it: a statement trigger on the table (INSERT, UPDATE, DELETE, TRUNCATE). Being in the
database, it sees every write whatever made it: services, bulk inserts and imports, the worker's vectors,
slim, restore, the admin, a cascade, psql. Python `on_commit` hooks could run after the commit but would
have to be remembered in each write path, and a forgotten one serves stale results without a trace.

The race, and why a trigger alone is not enough: a trigger runs *before* the commit, and `nextval` is not
transactional, so the new generation is visible while the write is not. A search could read the new
generation, run the engine on the old rows, and keep that result under the new generation: stale until
the next write. So a run is kept only when no write can be in flight:

- the trigger takes a shared advisory lock (7240, 3) for its transaction, *then* bumps the sequence;
- a search reads the generation, *then* tries that lock exclusively (and lets it go at once). The try
  fails while any writing transaction is open, and the run is used but not kept (outcome `uncached`).
  If it succeeds, every transaction whose bump the search read has ended, and PostgreSQL releases a
  transaction's locks only after its commit is visible, so the engine's queries (all after this one)
  see its rows. A write that starts later bumps past the generation read, which retires the entry.
- a transaction that wrote the table itself (a transaction-local flag the trigger sets) never keeps a
  run: a rollback could undo what the run saw, with no further bump.

Reading an entry needs no lock: it was kept under this generation, so it saw every commit up to it, and
an uncommitted write is no more visible to this search's own engine run than to the entry. Long write
transactions (a large import) only stop the cache from filling while they are open.

Also never kept: a degraded run (`SearchResult.degraded`: keywords only while the embedder is down, the
fused order when the LLM router failed), since no write follows the recovery. An entry older than MAX_AGE
is run again: keyword statistics of a large base are themselves cached for that long (keyword.py), and
the age bounds any drift that is not a write. A generation lower than one this process has seen (the
database restored from a dump) disables the cache until a restart rather than risk an old entry.
"""
import json
import threading
import time
from collections import OrderedDict
from dataclasses import astuple, dataclass, field, is_dataclass, replace

from django.conf import settings
from django.db import connection
from django.db.models import QuerySet

from core.metrics import SEARCH_CACHE
from knowledge.models import Knowledge
from knowledge.search import engine, routing
from knowledge.search.filters import FilterExpr
from knowledge.search.keyword import STATISTICS_TTL

MAX_ENTRIES = 2048
MAX_AGE = STATISTICS_TTL
# Arguments whose order means nothing to the engine (overlap and IN lookups): one entry for every order.
UNORDERED = {"types", "scopes", "readable_scopes", "statuses"}
# Columns a reply never shows: not read again for a cached hit.
UNSHOWN = ("embedding", "search_document", "source")


@dataclass(frozen=True)
class Hit:
    """What the reply takes from a ranked candidate (the attributes of rerank.Candidate it reads)."""

    id: str
    relevance: float
    quality_score: float
    explanation: dict


@dataclass(frozen=True)
class Found:
    hits: tuple[Hit, ...]
    notes: tuple = ()  # lazy: rendered in the language of whoever reads them
    items: dict = field(default_factory=dict)  # the run's own rows; empty when served from the cache
    cached: bool = False


class Entries:
    """A thread-safe LRU of Found per key, for the newest generation this process has seen."""

    def __init__(self, size: int = MAX_ENTRIES, max_age: float = MAX_AGE):
        self.size, self.max_age = size, max_age
        self.generation = 0
        self._entries: OrderedDict = OrderedDict()  # key -> (stored at, Found)
        self._lock = threading.Lock()

    def get(self, generation: int, key) -> Found | None:
        with self._lock:
            if generation > self.generation:  # the table changed: every entry is of an older generation
                self.generation = generation
                self._entries.clear()
            if generation != self.generation:
                return None
            entry = self._entries.get(key)
            if entry is None:
                return None
            if time.monotonic() - entry[0] > self.max_age:
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
            return entry[1]

    def put(self, generation: int, key, found: Found) -> bool:
        with self._lock:
            if generation != self.generation:  # read before a newer generation arrived: already stale
                return False
            self._entries[key] = (time.monotonic(), replace(found, items={}, cached=True))
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
            return True

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


_entries = Entries()


def generation() -> tuple[int, bool]:
    """(the generation, whether a run made now may be kept under it): one query."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT generation, storable FROM knowhub_search_generation()")
        current, storable = cursor.fetchone()
    return current, storable


def _normal(name: str, value):
    """A hashable form of one engine argument that equal runs share."""
    if value is None:
        return None
    if isinstance(value, FilterExpr):  # the parsed tree: a token's static filters AND the request's
        return json.dumps(value.to_dict(), sort_keys=True, default=str)
    if is_dataclass(value):  # the Gate's thresholds
        return (type(value).__name__, astuple(value))
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, default=str)
    if isinstance(value, (list, tuple, set, frozenset)):
        return tuple(sorted(set(value))) if name in UNORDERED else tuple(value)
    return value


def cache_key(params: dict) -> tuple:
    """Every argument of the run, and the settings that change its output without being arguments."""
    in_effect = (settings.KNOWHUB_EMBEDDING_MODEL, routing.routing_enabled() and settings.KNOWHUB_LLM_MODEL)
    return tuple(sorted((name, _normal(name, value)) for name, value in params.items())), in_effect


def _found(result: engine.SearchResult) -> Found:
    hits = tuple(Hit(id=c.id, relevance=c.relevance, quality_score=c.quality_score, explanation=dict(c.explanation))
                 for c in result.hits)
    return Found(hits=hits, notes=tuple(result.notes), items={hit.id: result.items[hit.id] for hit in hits})


def search(**params) -> Found:
    """`engine.search(**params)`'s hits, from this process's cache when the same run was kept at this generation."""
    if not settings.KNOWHUB_SEARCH_CACHE:
        SEARCH_CACHE.labels(outcome="off").inc()
        return _found(engine.search(**params))
    key = cache_key(params)
    current, storable = generation()
    cached = _entries.get(current, key)
    if cached is not None:
        SEARCH_CACHE.labels(outcome="hit").inc()
        return cached
    result = engine.search(**params)
    found = _found(result)
    kept = storable and not result.degraded and _entries.put(current, key, found)
    SEARCH_CACHE.labels(outcome="miss" if kept else "uncached").inc()
    return found


def hit_items(found: Found, *, visible: QuerySet[Knowledge]) -> list[tuple[Knowledge, Hit]]:
    """Each hit with its item as it is now: the run's own rows, or (a cached hit) read again from `visible`.

    An item gone since (it cannot be without a write, which retires the entry first) is left out."""
    items = found.items or visible.defer(*UNSHOWN).in_bulk([hit.id for hit in found.hits])
    return [(items[hit.id], hit) for hit in found.hits if hit.id in items]
