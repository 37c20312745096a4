"""Keyword scores (keyword.py): BM25 over the searched base, as a share of what the query could score."""
import threading
import time

import pytest
from django.db import connections

from knowledge.models import Knowledge
from knowledge.search import engine
from knowledge.search.keyword import keyword_candidates
from knowledge.search.text import informativeness
from tests.factories import make_knowledge

pytestmark = pytest.mark.django_db

BREAD = ("Keep the starter template up to date", "Copy the starter template, then rename the package and the settings module.")


def shares(text, scopes, **kwargs):
    base = engine.narrowed(engine.visible(readable_scopes=scopes))
    return dict(keyword_candidates(base, text=text, limit=50, **kwargs))


def test_a_base_scores_the_same_whatever_other_scopes_hold():
    item = make_knowledge(task=BREAD[0], content=BREAD[1], scopes=["org:acme"], embed=False)
    before = shares("starter template", ["org:acme"])[item.id]
    for n in range(20):  # another org writes "starter" and "template" everywhere
        make_knowledge(task=f"starter template {n}", content="starter template starter", scopes=["org:beta"], embed=False)
    assert shares("starter template", ["org:acme"])[item.id] == pytest.approx(before)
    assert shares("starter template", None)[item.id] != pytest.approx(before)  # a curator's base holds both


def test_a_query_word_no_item_holds_counts_against_the_match():
    """"sourdough starter" asked of a base that only knows "starter" is not a full match of its known part."""
    item = make_knowledge(task=BREAD[0], content=BREAD[1], embed=False)
    make_knowledge(task="Rotate the API keys", content="Revoke the old key after the new one is deployed.", embed=False)
    known_only = shares("starter template", ["org:acme"])[item.id]
    with_unknown = shares("sourdough starter template", ["org:acme"])[item.id]
    assert 0 < with_unknown < 0.75 * known_only


def test_an_everyday_chinese_word_no_item_holds_does_not_count_against_the_match():
    item = make_knowledge(task="天气查询工具的用法", content="调用天气接口时需要传入城市编码，返回未来七天的温度和降雨概率。", embed=False)
    make_knowledge(task="导出本月订单数据的流程", content="在后台选择订单模块，按月份筛选后导出表格。", embed=False)
    plain = shares("天气 查询", ["org:acme"])[item.id]
    assert shares("天气 查询 不会", ["org:acme"])[item.id] == pytest.approx(plain, rel=0.05)  # 不会: "won't"
    assert shares("天气 查询 拜占庭", ["org:acme"])[item.id] < 0.75 * plain  # 拜占庭: "Byzantine"


def test_a_filter_that_narrows_the_search_does_not_change_how_rare_a_word_is():
    item = make_knowledge(task=BREAD[0], content=BREAD[1], types=["tool"], embed=False)
    for n in range(5):
        make_knowledge(task=f"Starter kit {n}", content="The starter kit lists the first week's tasks.", types=["strategy"], embed=False)
    whole = engine.narrowed(engine.visible(readable_scopes=["org:acme"]))
    only_tools = whole.filter(types__overlap=["tool"])
    narrowed_share = dict(keyword_candidates(only_tools, text="starter template", limit=10, statistics=whole))[item.id]
    assert narrowed_share == pytest.approx(shares("starter template", ["org:acme"])[item.id])
    assert dict(keyword_candidates(only_tools, text="starter template", limit=10))[item.id] != pytest.approx(narrowed_share)


def test_informativeness_ranks_everyday_chinese_words_below_rare_ones_and_keeps_other_words_whole():
    assert informativeness("不会") == 0.0 < informativeness("明天") < informativeness("拜占庭") == 1.0
    assert informativeness("sourdough") == 1.0


@pytest.mark.django_db
def test_a_large_bases_statistics_are_kept_for_a_while_and_new_words_are_counted_exactly(monkeypatch):
    from knowledge.search import keyword

    monkeypatch.setattr(keyword, "STATISTICS_CACHE_MIN_ITEMS", 3)
    monkeypatch.setattr(keyword, "_statistics", keyword.OrderedDict())
    for text in ("alpha beta", "alpha gamma", "delta epsilon"):
        make_knowledge(task=text, scopes=["big"], embed=False)
    base = engine.narrowed(engine.visible(readable_scopes=["big"]))
    assert keyword._base_statistics(base, ["alpha"])[0::2] == (3, {"alpha": 2})
    make_knowledge(task="alpha zeta", scopes=["big"], embed=False)
    total, _, frequencies = keyword._base_statistics(base, ["alpha", "zeta"])
    assert total == 3 and frequencies["alpha"] == 2  # kept: a large base barely moves in STATISTICS_TTL
    assert frequencies["zeta"] == 1  # a word first asked now is counted now
    monkeypatch.setattr(keyword, "STATISTICS_TTL", 0.0)
    keyword._statistics.clear()
    keyword._base_statistics(base, ["alpha"])
    assert keyword._base_statistics(base, ["alpha"])[0::2] == (4, {"alpha": 3})  # expired: counted again


def _expire_statistics(*, by: float) -> None:
    from knowledge.search import keyword

    for entry in keyword._statistics.values():
        entry.expires = time.monotonic() - by


def _large_base_refreshed_in_background(monkeypatch, settings):
    """A base of three items counted as a large one (its statistics kept), expired entries counted by a thread."""
    from knowledge.search import keyword

    settings.KNOWHUB_STATISTICS_REFRESH_IN_BACKGROUND = True
    monkeypatch.setattr(keyword, "STATISTICS_CACHE_MIN_ITEMS", 3)
    monkeypatch.setattr(keyword, "_statistics", keyword.OrderedDict())
    monkeypatch.setattr(keyword, "_refreshing", {})
    for text in ("alpha beta", "alpha gamma", "delta epsilon"):
        make_knowledge(task=text, scopes=["big"], embed=False)
    return engine.narrowed(engine.visible(readable_scopes=["big"]))


@pytest.mark.django_db(transaction=True)  # the refresh's own connection sees committed rows only
def test_an_expired_large_base_is_served_while_one_thread_counts_it_again_on_its_own_connection(monkeypatch, settings):
    from knowledge.search import keyword

    base = _large_base_refreshed_in_background(monkeypatch, settings)
    assert keyword._base_statistics(base, ["alpha"])[0::2] == (3, {"alpha": 2})
    make_knowledge(task="alpha zeta", scopes=["big"], embed=False)
    _expire_statistics(by=1.0)

    release, counted_on, real = threading.Event(), [], keyword._count_base

    def held(*args):  # the count waits until the searches below have been answered
        release.wait(timeout=10)
        counted_on.append(connections["default"])  # the calling thread's connection
        return real(*args)

    monkeypatch.setattr(keyword, "_count_base", held)
    assert keyword._base_statistics(base, ["alpha"])[0::2] == (3, {"alpha": 2})  # expired, served: no wait
    (refresh,) = keyword._refreshing.values()
    assert keyword._base_statistics(base, ["alpha"])[0::2] == (3, {"alpha": 2})
    assert list(keyword._refreshing.values()) == [refresh]  # one refresh at a time
    release.set()
    refresh.join(timeout=10)
    assert not refresh.is_alive() and keyword._refreshing == {}
    (wrapper,) = counted_on
    assert wrapper is not connections["default"] and wrapper.connection is None  # its own, closed
    assert keyword._base_statistics(base, ["alpha"])[0::2] == (4, {"alpha": 3})  # the count replaced the entry


@pytest.mark.django_db(transaction=True)  # the exact count runs on a thread of its own, which sees committed rows
def test_a_large_bases_first_search_takes_the_mean_length_of_its_first_documents_and_the_exact_one_follows(
        monkeypatch, settings):
    from django.db import connection

    from knowledge.search import keyword

    base = _large_base_refreshed_in_background(monkeypatch, settings)  # three items
    make_knowledge(task="alpha " + " ".join(f"w{n}" for n in range(40)), scopes=["big"], embed=False)  # a longer one
    monkeypatch.setattr(keyword, "LENGTH_SAMPLE", 3, raising=False)
    monkeypatch.setattr(keyword, "estimated_rows", lambda model: 100_000)  # a large table's base
    statements = []
    with connection.execute_wrapper(lambda execute, sql, *rest: statements.append(sql) or execute(sql, *rest)):
        total, average, frequencies = keyword._base_statistics(base, ["alpha"])
    exact = keyword._count_all(*base.order_by().values_list("search_document").query.sql_with_params(), [])
    assert (total, frequencies) == (4, {"alpha": 3}) and exact[0] == 4
    with connection.cursor() as cursor:
        cursor.execute("SELECT length(search_document) FROM knowledge_knowledge WHERE scopes && ARRAY['big']::varchar[]")
        lengths = [row[0] for row in cursor.fetchall()]
    means_of_three = {sum(lengths) - left_out for left_out in lengths}
    assert round(average * 3) in means_of_three and average != exact[1]  # three of the four documents' mean, not all four's
    assert not any("avg(length(d))" in sql and "LIMIT" not in sql for sql in statements)  # no full pass in the search
    (refresh,) = keyword._refreshing.values()  # the exact count, started at once
    refresh.join(timeout=10)
    assert keyword._base_statistics(base, ["alpha"])[:2] == exact[:2]  # then served


@pytest.mark.django_db
def test_a_failed_refresh_is_logged_the_expired_entry_still_served_and_the_next_search_tries_again(monkeypatch, settings, caplog):
    from knowledge.search import keyword

    base = _large_base_refreshed_in_background(monkeypatch, settings)
    keyword._base_statistics(base, ["alpha"])
    _expire_statistics(by=1.0)
    attempts = []

    def failing(*args):
        attempts.append(args)
        raise RuntimeError("database gone")

    monkeypatch.setattr(keyword, "_count_base", failing)
    for attempt in (1, 2):
        assert keyword._base_statistics(base, ["alpha"])[0::2] == (3, {"alpha": 2})
        for thread in list(keyword._refreshing.values()):
            thread.join(timeout=10)
        assert len(attempts) == attempt and keyword._refreshing == {}
    assert "counting a base's keyword statistics again failed" in caplog.text


@pytest.mark.django_db
def test_a_large_base_unsearched_for_twice_its_statistics_lifetime_is_counted_by_the_search(monkeypatch, settings):
    from knowledge.search import keyword

    base = _large_base_refreshed_in_background(monkeypatch, settings)
    keyword._base_statistics(base, ["alpha"])
    make_knowledge(task="alpha zeta", scopes=["big"], embed=False)
    _expire_statistics(by=keyword.STATISTICS_TTL + 1.0)
    assert keyword._base_statistics(base, ["alpha"])[0::2] == (4, {"alpha": 3})
    assert keyword._refreshing == {}  # counted by the search itself, no thread


def _large_bases_counting_two_holders(monkeypatch):
    """Bases of three items are large ones, a word's holders are counted up to two, ANALYZE's shares read afresh."""
    from knowledge.search import keyword

    monkeypatch.setattr(keyword, "STATISTICS_CACHE_MIN_ITEMS", 3)
    monkeypatch.setattr(keyword, "HOLDERS_COUNTED", 2)
    monkeypatch.setattr(keyword, "_shares", {})  # ANALYZE runs in the tests: no earlier test's shares
    monkeypatch.setattr(keyword, "_statistics", keyword.OrderedDict())


@pytest.mark.django_db
def test_in_a_base_of_most_of_the_table_a_word_analyze_finds_common_is_taken_from_its_share_without_a_count(
        monkeypatch):
    from django.db import connection

    from knowledge.search import keyword

    _large_bases_counting_two_holders(monkeypatch)
    for n in range(5):
        make_knowledge(task=f"alpha beta {n}", scopes=["big"], embed=False)
    make_knowledge(task="zeta", scopes=["big"], embed=False)
    make_knowledge(task="alpha", scopes=["small"], embed=False)  # the base is 6 of the table's 7 items
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE knowledge_knowledge")
    asked, count = [], keyword._count_holders
    monkeypatch.setattr(keyword, "_count_holders", lambda sql, params, lexemes, **kwargs: asked.extend(lexemes)
                        or count(sql, params, lexemes, **kwargs))
    base = engine.narrowed(engine.visible(readable_scopes=["big"]))
    keyword._base_statistics(base, ["zeta"])
    share = keyword._lexeme_shares(Knowledge)["alpha"]
    total, _, frequencies = keyword._base_statistics(base, ["alpha", "zeta", "beta"])
    assert total == 6 and frequencies["alpha"] == round(share * 6) >= 2  # ANALYZE's share of the table, times the base
    assert "alpha" not in asked and frequencies["zeta"] == 1  # a rare word is still counted


@pytest.mark.django_db
def test_a_large_bases_common_new_word_takes_analyzes_share_unless_the_base_holds_more_of_it(monkeypatch):
    from django.db import connection

    from knowledge.search import keyword

    _large_bases_counting_two_holders(monkeypatch)
    for n in range(3):
        make_knowledge(task=f"alpha beta {n}", scopes=["big"], embed=False)
    make_knowledge(task="delta epsilon", scopes=["big"], embed=False)
    for n in range(6):  # elsewhere, "alpha" is in every item
        make_knowledge(task=f"alpha gamma {n}", scopes=["other"], embed=False)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE knowledge_knowledge")
    base = engine.narrowed(engine.visible(readable_scopes=["big"]))
    assert keyword._base_statistics(base, ["delta"])[0::2] == (4, {"delta": 1})  # the base, counted once
    make_knowledge(task="epsilon zeta", scopes=["big"], embed=False)
    make_knowledge(task="epsilon eta", scopes=["big"], embed=False)
    _, _, frequencies = keyword._base_statistics(base, ["alpha", "beta", "epsilon"])
    assert frequencies["alpha"] == 4  # held by 3 of the base's 4: ANALYZE's 9 in 10 of the table, times 4
    assert frequencies["beta"] == 3  # 3 of 10 in the table would be 1 of the base, fewer than counted: counted
    assert frequencies["epsilon"] == 3  # unknown to ANALYZE (it ran before two of its holders): counted


@pytest.mark.django_db
def test_a_small_bases_statistics_are_counted_on_every_search():
    from knowledge.search import keyword

    make_knowledge(task="alpha beta", scopes=["small"], embed=False)
    base = engine.narrowed(engine.visible(readable_scopes=["small"]))
    assert keyword._base_statistics(base, ["alpha"])[0::2] == (1, {"alpha": 1})
    make_knowledge(task="alpha gamma", scopes=["small"], embed=False)
    assert keyword._base_statistics(base, ["alpha"])[0::2] == (2, {"alpha": 2})


@pytest.mark.django_db
def test_only_holders_of_the_rarer_query_words_are_scored_when_the_common_ones_would_exceed_the_budget(monkeypatch):
    from knowledge.search import keyword

    rare = make_knowledge(task="zebra crossing common", scopes=["z"], embed=False)
    common_only = [make_knowledge(task=f"common word {n}", scopes=["z"], embed=False) for n in range(4)]
    base = engine.narrowed(engine.visible(readable_scopes=["z"]))
    everyone = dict(keyword_candidates(base, text="zebra common", limit=10))
    assert set(everyone) == {rare.id, *(item.id for item in common_only)}  # within the budget: every match scored
    monkeypatch.setattr(keyword, "SCORE_BUDGET", 3)
    assert keyword.scored_lexemes({"zebra": 1, "common": 5, "word": 4}) == ["zebra"]
    assert keyword.scored_lexemes({"common": 5, "word": 4}) == ["word"]  # the rarest is always scored
    bounded = keyword_candidates(base, text="zebra common", limit=10)
    assert [item_id for item_id, _ in bounded] == [rare.id]
    assert bounded[0][1] == pytest.approx(everyone[rare.id])  # a scored item still counts every query word it holds


def test_scores_are_okapi_bm25_over_the_stored_documents_title_words_and_bare_identifiers_included():
    """The scoring SQL against BM25 computed here from each document's lexemes, positions and weights."""
    import math

    from django.db import connection

    from knowledge.search import keyword

    texts = [
        ("Fix ERR_CONNECTION_RESET in the proxy", "Restart the proxy; the proxy pool resets stale connections."),
        ("Proxy pool sizing", "Keep the pool small. A pool of ten proxies is enough; pool proxies per region."),
        ("ERR_CONNECTION_RESET", "Seen when the upstream closes early."),
        ("Deploy notes", "Roll back with the previous tag when the deploy fails."),
        ("代理池", "代理池 用于 轮换 代理 proxy"),
    ]
    items = [make_knowledge(task=task, content=content, scopes=["org:bm"], embed=False) for task, content in texts]
    query = "proxy pool ERR_CONNECTION_RESET 代理池"
    found = shares(query, ["org:bm"])

    documents = {}
    with connection.cursor() as cursor:
        cursor.execute("SELECT k.id, u.lexeme, u.positions, u.weights FROM knowledge_knowledge k, unnest(k.search_document) u"
                       " WHERE k.id = ANY(%s)", [[item.id for item in items]])
        for item_id, lexeme, positions, weights in cursor.fetchall():
            documents.setdefault(item_id, {})[lexeme] = (len(positions or []), list(weights or []).count("A"))
    words = keyword.query_lexemes(query)
    # the identifier is stored whole and without positions (array_to_tsvector), beside its parts
    assert "err_connection_reset" in words and documents[items[2].id]["err_connection_reset"] == (0, 0)
    total, average = len(documents), sum(map(len, documents.values())) / len(documents)
    idf = {w: math.log(1 + (total - df + 0.5) / (df + 0.5)) for w in words if (df := sum(w in d for d in documents.values()))}
    assert set(idf) == set(words)  # every query word held: the ceiling is the query's words alone

    def bm25(document):
        score = 0.0
        for word, weight in idf.items():
            if word in document:
                positions, title = document[word]
                tf = max(positions, 1) + (keyword.TITLE_BOOST - 1) * title
                length = len(document)
                score += weight * tf * (keyword.BM25_K1 + 1) / (
                    tf + keyword.BM25_K1 * (1 - keyword.BM25_B + keyword.BM25_B * length / average))
        return score

    ceiling = sum(idf.values()) * (keyword.BM25_K1 + 1) * keyword.TITLE_BOOST
    expected = {item_id: bm25(document) / ceiling for item_id, document in documents.items() if bm25(document) > 0}
    assert found.keys() == expected.keys() and len(found) == 4  # all but the deploy notes
    for item_id, share in expected.items():
        assert found[item_id] == pytest.approx(share, rel=1e-9)


def test_statistics_leaving_out_an_item_score_as_if_the_item_were_not_in_the_base():
    """`leave_out`: the audience's statistics less the item's own document equal the statistics of the audience
    without it, for every candidate's score (words the item alone holds become unseen words again)."""
    texts = [("Proxy pool sizing", "Keep the proxy pool small; rotate proxies per region."),
             ("Rotate proxies", "A pool of ten proxies is enough for the crawler."),
             ("Crawler retries", "Retry a failed fetch three times with backoff."),
             ("Deploy notes", "Roll back with the previous tag.")]
    items = [make_knowledge(task=task, content=content, scopes=["org:lo"], embed=False) for task, content in texts]
    item = make_knowledge(task="Proxy pool rotation with zanzibar backoff", content="Rotate the proxy pool per region; "
                          "zanzibar is a word no other item holds.", scopes=["org:lo"], embed=False)
    audience = engine.narrowed(engine.visible(readable_scopes=["org:lo"]))
    others = audience.exclude(pk=item.pk)
    query = f"{item.task}\n{item.content}"
    expected = dict(keyword_candidates(others, text=query, limit=10))
    left_out = dict(keyword_candidates(others, text=query, limit=10, statistics=audience, leave_out=item.pk))
    assert set(expected) == set(left_out) and len(expected) >= 3 and item.id not in expected
    for item_id, share in expected.items():
        assert left_out[item_id] == pytest.approx(share, rel=1e-9)
    counted_with_it = dict(keyword_candidates(others, text=query, limit=10, statistics=audience))
    assert counted_with_it[items[0].id] != pytest.approx(expected[items[0].id])  # the item's own words did count
    outside = make_knowledge(task="Unrelated", content="Another scope's item.", scopes=["org:else"], embed=False)
    assert dict(keyword_candidates(others, text=query, limit=10, statistics=others, leave_out=outside.id)) == pytest.approx(expected)


def test_conflict_detection_weighs_keyword_neighbours_in_the_audience_counted_once_not_once_per_item(monkeypatch):
    from knowledge import conflicts
    from knowledge.search import keyword

    monkeypatch.setattr(keyword, "STATISTICS_CACHE_MIN_ITEMS", 3)
    monkeypatch.setattr(keyword, "_statistics", keyword.OrderedDict())
    saved = [make_knowledge(task=f"Proxy pool note {n}", content="Rotate the proxy pool per region.", scopes=["org:cd"],
                            embed=False) for n in range(4)]
    counted = []
    real_count = keyword._count_base
    monkeypatch.setattr(keyword, "_count_base", lambda *args, **kwargs: counted.append(args[0]) or real_count(*args, **kwargs))
    for item in saved:
        conflicts.close_pairs(item, conflicts._candidates(item), audience=conflicts._audience(item))
    assert len(counted) == 1  # the audience once (kept: a large base), not a base without each item
    assert len(keyword._statistics) == 1


def test_a_large_bases_first_count_reads_its_items_once_and_its_words_through_the_index(monkeypatch):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from knowledge.search import keyword

    monkeypatch.setattr(keyword, "STATISTICS_CACHE_MIN_ITEMS", 3)
    monkeypatch.setattr(keyword, "_statistics", keyword.OrderedDict())
    monkeypatch.setattr(keyword, "estimated_rows", lambda model: 100_000)  # a table large enough for a large base
    for text in ("alpha beta", "alpha gamma", "delta epsilon", "alpha alpha omega"):
        make_knowledge(task=text, scopes=["wide"], embed=False)
    make_knowledge(task="alpha", scopes=["narrow"], embed=False)
    exact = keyword._count_all(*engine.narrowed(engine.visible(readable_scopes=["wide"])).order_by()
                               .values_list("search_document").query.sql_with_params(), ["alpha", "beta", "zeta"])
    with CaptureQueriesContext(connection) as statements:
        counted = keyword._base_statistics(engine.narrowed(engine.visible(readable_scopes=["wide"])), ["alpha", "beta", "zeta"])
    assert counted[0] == exact[0] == 4 and counted[1] == pytest.approx(exact[1])
    assert counted[2] == exact[2] == {"alpha": 3, "beta": 1, "zeta": 0}
    assert not any("FILTER (WHERE d @@" in s["sql"] for s in statements.captured_queries)  # no word matched per row
    with CaptureQueriesContext(connection) as statements:  # a small base of the large table: counted exactly at once
        assert keyword._base_statistics(engine.narrowed(engine.visible(readable_scopes=["narrow"])), ["alpha"])[0::2] == (1, {"alpha": 1})
    assert any("FILTER (WHERE d @@" in s["sql"] for s in statements.captured_queries)


def test_an_item_saved_after_its_audiences_statistics_were_kept_still_finds_the_item_it_shares_a_rare_word_with(monkeypatch):
    from knowledge.search import keyword

    monkeypatch.setattr(keyword, "STATISTICS_CACHE_MIN_ITEMS", 3)
    monkeypatch.setattr(keyword, "_statistics", keyword.OrderedDict())
    for n in range(4):
        make_knowledge(task=f"Deploy note {n}", content="Roll back with the previous tag.", scopes=["org:st"], embed=False)
    first = make_knowledge(task="zanzibarq error in the crawler", content="Retry the zanzibarq fetch with backoff.",
                           scopes=["org:st"], embed=False)
    audience = engine.narrowed(engine.visible(readable_scopes=["org:st"]))
    keyword_candidates(audience.exclude(pk=first.pk), text=f"{first.task}\n{first.content}", limit=10,
                       statistics=audience, leave_out=first.pk)  # the audience's statistics kept, "zanzibarq": 1
    second = make_knowledge(task="zanzibarq errors in the crawler", content="Retry zanzibarq fetches with backoff.",
                            scopes=["org:st"], embed=False)  # saved after: the kept figures do not hold it
    query = f"{second.task}\n{second.content}"
    found = dict(keyword_candidates(audience.exclude(pk=second.pk), text=query, limit=10, statistics=audience,
                                    leave_out=second.pk))
    keyword._statistics.clear()
    exact = dict(keyword_candidates(audience.exclude(pk=second.pk), text=query, limit=10))
    assert first.id in found and found[first.id] == pytest.approx(exact[first.id], rel=0.05)


def test_a_small_base_of_a_large_table_is_counted_in_one_pass_once_known_small(monkeypatch):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from knowledge.search import keyword

    monkeypatch.setattr(keyword, "estimated_rows", lambda model: 100_000)
    monkeypatch.setattr(keyword, "_small", keyword.OrderedDict())
    make_knowledge(task="alpha beta", scopes=["tiny"], embed=False)
    base = engine.narrowed(engine.visible(readable_scopes=["tiny"]))

    def passes():
        with CaptureQueriesContext(connection) as statements:
            assert keyword._base_statistics(base, ["alpha"])[0::2] == (1, {"alpha": 1})
        return sum("AS base(d)" in s["sql"] for s in statements.captured_queries)

    assert passes() == 2  # the first time: its size, then its words
    assert passes() == 1
