"""The agent search's result cache: a repeated search skips the engine until what its reply shows changes.

What is kept: a search's reply as `knowledge_search` renders it before the per-request parts (the search
log and its `search_id`, whether the explanations are shown), per web process, in a bounded LRU
(MAX_ENTRIES) keyed by (generation, every argument of the engine run, the settings that shape it). The
explanations are kept too: they hold ranks, scores and the gate's reasons, a function of the same data
and arguments (no timing, no run id), so an explained hit says what a run would. Only the agent search
uses the cache; the playground, the curation list and `ranking_eval` call the engine directly, so they
always show a real run.

That reply is a function of three tables: `knowledge_knowledge` (what the engine ranks: text, keyword
documents, vectors, scopes, status, counters; the rows shown; no relative-time filter exists),
`knowledge_knowledgeresource` (each row's `resource_ids`) and `knowledge_conflict` (the open conflicts a
hit warns of), read with the caller's readable scopes (part of the key, as are a token's static filters).
Their version is the **generation**: the PostgreSQL sequence `knowhub_search_generation`, read once per
search (`knowhub_search_generation()`, migration 0003), so every web process and the worker agree on it.

Who advances it: a statement trigger on those tables (INSERT, UPDATE, DELETE, TRUNCATE). Being in the
database, it sees every write whatever made it: services, bulk inserts and imports, the worker's vectors
and conflict detection, slim, restore, the admin, a cascade, psql. Python `on_commit` hooks could run after
the commit but would have to be remembered in each write path, and a forgotten one serves stale replies
without a trace.

The race, and why a trigger alone is not enough: a trigger runs *before* the commit, and `nextval` is not
transactional, so the new generation is visible while the write is not. A search could read the new
generation, run on the old rows, and keep that reply under the new generation: stale until the next write.
So a run is kept only when no write can be in flight:

- the trigger takes a shared advisory lock (7240, 3) for its transaction, *then* bumps the sequence;
- a search reads the generation, *then* tries that lock exclusively (and lets it go at once). The try
  fails while any writing transaction is open, and the run is used but not kept (outcome `uncached`).
  If it succeeds, every transaction whose bump the search read has ended, and PostgreSQL releases a
  transaction's locks only after its commit is visible, so the run's queries (all after this one, each
  with a fresh snapshot under READ COMMITTED) see its rows. A write that starts later bumps past the
  generation read, which retires the entry.
- a transaction that wrote those tables itself (a transaction-local flag the trigger sets) never keeps a
  run: a rollback could undo what the run saw, with no further bump.

Reading an entry needs no lock: it was kept under this generation, so it saw every commit up to it, and an
uncommitted write is no more visible to a fresh run than to the entry. Long write transactions (a large
import) only stop the cache from filling while they are open.

Also never kept: a degraded run (`SearchResult.degraded`: keywords only while the embedder is down, the
fused order when the LLM router failed), since no write follows the recovery. An entry older than MAX_AGE
is run again: keyword statistics of a large base are themselves kept for that long (keyword.py; served up to twice
as long while they are counted again), and the age bounds any drift that is not a write. A generation lower than one this process has seen (the database
restored from a dump) disables the cache until a restart rather than risk an old entry.
"""
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import astuple, is_dataclass
from typing import TypeVar

from django.conf import settings
from django.db import connection

from core.metrics import SEARCH_CACHE
from knowledge.search import routing
from knowledge.search.filters import FilterExpr
from knowledge.search.keyword import STATISTICS_TTL

MAX_ENTRIES = 2048
MAX_AGE = STATISTICS_TTL
# Arguments whose order means nothing to the engine (overlap and IN lookups): one entry for every order.
UNORDERED = {"types", "scopes", "readable_scopes", "statuses"}
T = TypeVar("T")


class Entries:
    """A thread-safe LRU of replies per key, for the newest generation this process has seen."""

    def __init__(self, size: int = MAX_ENTRIES, max_age: float = MAX_AGE):
        self.size, self.max_age = size, max_age
        self.generation = 0
        self._entries: OrderedDict = OrderedDict()  # key -> (stored at, reply)
        self._lock = threading.Lock()

    def get(self, generation: int, key):
        with self._lock:
            if generation > self.generation:  # a write since: every entry is of an older generation
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

    def put(self, generation: int, key, value) -> bool:
        with self._lock:
            if generation != self.generation:  # read before a newer generation arrived: already stale
                return False
            self._entries[key] = (time.monotonic(), value)
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
    """Every engine argument, and the settings that change the run's output without being arguments."""
    in_effect = (settings.KNOWHUB_EMBEDDING_MODEL, routing.routing_enabled() and settings.KNOWHUB_LLM_MODEL)
    return tuple(sorted((name, _normal(name, value)) for name, value in params.items())), in_effect


def cached(params: dict, run: Callable[[], tuple[T, bool]]) -> T:
    """The reply for the engine arguments `params`: kept from an earlier `run()` at this generation, or
    `run()`'s now. `run` returns (reply, whether a healthy run made it: False for a degraded one)."""
    if not settings.KNOWHUB_SEARCH_CACHE:
        SEARCH_CACHE.labels(outcome="off").inc()
        return run()[0]
    key = cache_key(params)
    current, storable = generation()
    reply = _entries.get(current, key)
    if reply is not None:
        SEARCH_CACHE.labels(outcome="hit").inc()
        return reply
    reply, healthy = run()
    kept = storable and healthy and _entries.put(current, key, reply)
    SEARCH_CACHE.labels(outcome="miss" if kept else "uncached").inc()
    return reply
