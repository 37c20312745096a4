"""The candidate step (knowledge.neighbours): close pairs from the real embedder's stored vectors and keyword search."""
import pytest

from knowledge import neighbours
from knowledge.models import Knowledge
from knowledge.search.indexing import embed_items
from knowledge.slim import find_groups
from tests.factories import make_knowledge

pytestmark = pytest.mark.django_db

# d-10 of bench/data/pairs-dev, and a paraphrase of it
NGINX = ("Reloading nginx safely", "Always run nginx -t to test the configuration before nginx -s reload; a broken config otherwise takes the site down.")
NGINX_ZH = ("安全地重载 nginx", "重载前先执行 nginx -t 检查配置，再 nginx -s reload，否则配置写错会让网站挂掉。")
NGINX_PARAPHRASE = ("Safe nginx reloads", "Test the config with nginx -t before every nginx -s reload, because a bad configuration would bring the site down.")
UNRELATED = ("Reconcile invoices", "Export the ledger as CSV and match invoice numbers against the bank statement.")


def saved(rows, *, scopes=("org:acme",), owner="agent:research_agent", embed=True):
    items = [make_knowledge(task=t, content=c, scopes=list(scopes), owner=owner, embed=False) for t, c in rows]
    if embed:
        embed_items(items=items)
    return [Knowledge.objects.get(pk=i.pk) for i in items]


def test_close_pairs_finds_a_translation_and_a_paraphrase_and_not_an_unrelated_item():
    item, translation, paraphrase, unrelated = saved([NGINX, NGINX_ZH, NGINX_PARAPHRASE, UNRELATED])
    pairs = neighbours.close_pairs(item, Knowledge.objects.exclude(pk=item.pk))
    by_id = {p.other_id: p for p in pairs}
    assert set(by_id) == {translation.id, paraphrase.id}
    assert by_id[translation.id].cross_script and not by_id[paraphrase.id].cross_script
    assert by_id[translation.id].duplicate_likely and by_id[paraphrase.id].duplicate_likely
    assert all(0.0 < p.similarity <= 1.0 and 0.0 <= p.keyword <= 1.0 for p in pairs)
    assert by_id[paraphrase.id].keyword > by_id[translation.id].keyword  # across languages only the names are shared
    assert unrelated.id not in by_id

    # the Chinese item finds its English translations the same way
    from_zh = {p.other_id for p in neighbours.close_pairs(translation, Knowledge.objects.exclude(pk=translation.pk))}
    assert from_zh == {item.id, paraphrase.id}


def test_close_pairs_keeps_to_the_candidates_given_and_to_the_limit():
    item, translation, paraphrase, _ = saved([NGINX, NGINX_ZH, NGINX_PARAPHRASE, UNRELATED])
    assert [p.other_id for p in neighbours.close_pairs(item, Knowledge.objects.filter(pk=paraphrase.pk))] == [paraphrase.id]
    assert len(neighbours.close_pairs(item, Knowledge.objects.all(), limit=1)) == 1
    assert item.id not in {p.other_id for p in neighbours.close_pairs(item, Knowledge.objects.all())}  # never itself
    assert translation


def test_an_item_still_without_a_vector_is_matched_by_its_words_only():
    again = ("Reloading nginx safely", "Always run nginx -t before nginx -s reload; a broken config would take the site down.")
    (item,) = saved([again], embed=False)  # the same advice saved again, before the worker embedded it
    first, _, unrelated = saved([NGINX, NGINX_ZH, UNRELATED])
    pairs = neighbours.close_pairs(item, Knowledge.objects.exclude(pk=item.pk))
    assert pairs[0].other_id == first.id and unrelated.id not in {p.other_id for p in pairs}
    assert pairs[0].similarity == 0.0 and pairs[0].keyword >= neighbours.CANDIDATE_KEYWORD and not pairs[0].duplicate_likely


def test_choose_orders_by_the_margin_over_each_script_pairings_threshold():
    found = neighbours.Found(
        script="latin",
        vector={"latin": [("a", 0.85), ("b", 0.69)], "han": [("c", 0.80)]},
        keyword=[("b", 0.45), ("d", 0.1)],
        similarity={"a": 0.85, "b": 0.69, "c": 0.80, "d": 0.5},
        scripts={"a": "latin", "b": "latin", "c": "han", "d": "latin"},
    )
    limits = neighbours.Thresholds(candidate_same=0.70, candidate_cross=0.68, candidate_keyword=0.4,
                                   duplicate_same=0.88, duplicate_cross=0.74)
    pairs = neighbours.choose(found, limit=5, thresholds=limits)
    assert [p.other_id for p in pairs] == ["a", "c", "b"]  # margins 0.15, 0.12 (across: 0.80 - 0.68), b by keyword 0.05
    assert [p.duplicate_likely for p in pairs] == [False, True, False] and pairs[1].cross_script
    assert [p.keyword for p in pairs] == [0.0, 0.0, 0.45]  # d: below both thresholds
    assert [p.other_id for p in neighbours.choose(found, limit=1, thresholds=limits)] == ["a"]


def test_find_groups_joins_an_english_chinese_translation_of_the_same_scopes_whoever_saved_them():
    en, zh = saved([NGINX, NGINX_ZH], owner="agent:research_agent")
    (zh_by_another_agent,) = saved([NGINX_ZH], owner="agent:coder")
    saved([NGINX_ZH], scopes=("org:other",))  # another audience: never in acme's group
    saved([UNRELATED])
    assert find_groups() == [sorted([en.id, zh.id, zh_by_another_agent.id])]


SELENIUM = [
    ("Log in to site A with Selenium", "Use undetected_chromedriver to avoid bot detection, add random delays."),
    ("Logging in to site A using Selenium", "undetected_chromedriver avoids the bot detection; also wait a random time between actions."),
    ("用 Selenium 登录 A 站", "用 undetected_chromedriver 避开机器人检测，并在操作之间随机等待。"),
]


@pytest.fixture
def audiences():
    """Duplicates within and across scripts in three audiences, an unrelated item, and one still without a vector."""
    acme = saved([NGINX, NGINX_ZH, NGINX_PARAPHRASE, UNRELATED, *SELENIUM])
    other = saved([NGINX_ZH, NGINX, SELENIUM[0]], scopes=("org:other",))
    both = saved([NGINX_PARAPHRASE, SELENIUM[2]], scopes=("org:acme", "org:other"))
    (pending,) = saved([NGINX], embed=False)
    return {"org:acme": acme + [pending], "org:other": other, "both": both}


# 2,000: every audience through the exact scan; 4: acme has five Latin items with a vector, so a Latin item's four
# Latin candidates are scanned exactly and a Han item's five go through the HNSW index (an item is not its own
# candidate); 0: all through the index.
@pytest.mark.parametrize("exact_scan_max_rows", [2000, 4, 0], ids=["exact-scan", "mixed", "hnsw"])
def test_close_pairs_among_an_audience_are_close_pairs_asked_item_by_item(audiences, monkeypatch, exact_scan_max_rows):
    from knowledge.search import vector

    monkeypatch.setattr(vector, "EXACT_SCAN_MAX_ROWS", exact_scan_max_rows)
    for members in audiences.values():
        same_audience = Knowledge.objects.filter(scopes__contains=members[0].scopes, scopes__contained_by=members[0].scopes)
        among = neighbours.close_pairs_among(same_audience, page=2)  # several pages
        assert set(among) == {item.id for item in members}
        for item in members:
            assert among[item.id] == neighbours.close_pairs(item, same_audience.exclude(pk=item.pk), keywords=False)
    acme = audiences["org:acme"]
    found = neighbours.close_pairs_among(Knowledge.objects.filter(scopes=["org:acme"]))
    assert {p.other_id for p in found[acme[0].id] if p.duplicate_likely} == {acme[1].id, acme[2].id}  # its translation, its paraphrase
    assert found[acme[-1].id] == [] and acme[-1].id not in {p.other_id for pairs in found.values() for p in pairs}  # no vector yet


def test_find_groups_are_the_groups_of_each_items_own_close_pairs(audiences):
    from knowledge.slim import group_pairs

    edges = []
    for item in Knowledge.objects.exclude(embedding=None):
        same_audience = Knowledge.objects.filter(scopes__contains=item.scopes, scopes__contained_by=item.scopes).exclude(pk=item.pk)
        edges += [tuple(sorted((item.id, p.other_id))) for p in neighbours.close_pairs(item, same_audience, keywords=False)
                  if p.duplicate_likely]
    groups = find_groups()
    assert groups == group_pairs(edges) and len(groups) == 3  # acme's nginx and selenium items, other's nginx pair
