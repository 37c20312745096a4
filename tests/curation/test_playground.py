"""Search playground: the two stages as a chosen agent token sees them."""
import pytest

from agents.services import agent_token_create
from tests.factories import make_knowledge

pytestmark = pytest.mark.django_db


@pytest.fixture
def items():
    return {
        "good": make_knowledge(task="Selenium login with chromedriver", score=4, helpful=3, embed=False),
        "low": make_knowledge(task="chromedriver flaky login trick", score=2, embed=False),
        "other_org": make_knowledge(task="chromedriver for the other org", scopes=["org:other"], embed=False),
        "plan": make_knowledge(task="chromedriver upgrade plan", types=["plan"], embed=False),
    }


def test_both_stages_as_the_token_sees_them(viewer_client, items):
    token, _ = agent_token_create(agent_id="research_agent", readable_scopes=["org:acme"])
    body = viewer_client.get(f"/playground/?token={token.pk}&q=chromedriver&top_k=5&min_score=3&rank=quality").content.decode()
    stage2 = body.split('id="stage2"')[1].split("</table>")[0]
    stage1 = body.split('id="stage1"')[1].split("</table>")[0]
    assert "Selenium login" in stage2 and "flaky" not in stage2
    assert "flaky" in stage1 and "left out: score 2 is below min_score 3" in stage1 and "kept, rank 1" in stage1
    assert "other org" not in body  # outside the token's scopes
    assert "agent:research_agent" in body


def test_the_tokens_static_filters_apply(viewer_client, items):
    token, _ = agent_token_create(agent_id="planner", readable_scopes=["org:acme"],
                                  static_filters={"op": "EQ", "key": "types", "value": "plan"})
    body = viewer_client.get(f"/playground/?token={token.pk}&q=chromedriver&top_k=5&min_score=1&rank=quality",
                             HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in body and "upgrade plan" in body and "Selenium login" not in body


def test_bad_filters_are_named_in_place(viewer_client, items):
    token, _ = agent_token_create(agent_id="research_agent", readable_scopes=["org:acme"])
    response = viewer_client.get(f"/playground/?token={token.pk}&q=x&top_k=5&min_score=3&rank=quality&filters=%7Bnope")
    assert response.status_code == 422 and "<strong>filters</strong>: not valid JSON" in response.content.decode()
    response = viewer_client.get(f"/playground/?token={token.pk}&q=x&top_k=5&min_score=3&rank=quality"
                                 "&filters=%7B%22op%22%3A%22EQ%22%2C%22key%22%3A%22bogus%22%2C%22value%22%3A1%7D")
    assert response.status_code == 422 and "bogus" in response.content.decode()


def test_playground_without_tokens_says_how_to_make_one(viewer_client):
    assert "No active agent tokens" in viewer_client.get("/playground/").content.decode()


def test_in_chinese_each_left_out_candidate_says_why_in_chinese(viewer_client, items):
    token, _ = agent_token_create(agent_id="research_agent", readable_scopes=["org:acme"])
    body = viewer_client.get(f"/playground/?token={token.pk}&q=chromedriver&top_k=5&min_score=3&rank=quality",
                             HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    stage1 = body.split('id="stage1"')[1].split("</table>")[0]
    assert "被排除：评分 2 低于最低评分 3" in stage1 and "保留，排名 1" in stage1
    assert "left out" not in stage1 and "below min_score" not in stage1


def test_an_items_explanation_gives_the_gate_reason_in_the_readers_language(viewer_client, items):
    url = f"/knowledge/{items['low'].id}/explain/?q=chromedriver"
    assert "left out: score 2 is below min_score 3" in viewer_client.get(url).content.decode()
    assert "被排除：评分 2 低于最低评分 3" in viewer_client.get(url, HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()



@pytest.mark.parametrize("filters, chinese", [
    ('{"op": "EQ", "key": "types"}', "EQ 需要 &quot;op&quot;, &quot;key&quot;, &quot;value&quot;（缺少 value）"),
    ('{"op": "EQ", "key": "bogus", "value": 1}', "未知的过滤键 &#x27;bogus&#x27;"),
    ('{"op": "GT", "key": "score", "value": "many"}', "score 上的 GT 需要数字"),
])
def test_in_chinese_a_bad_filter_is_named_in_chinese(viewer_client, items, filters, chinese):
    from urllib.parse import quote

    token, _ = agent_token_create(agent_id="research_agent", readable_scopes=["org:acme"])
    url = f"/playground/?token={token.pk}&q=x&top_k=5&min_score=3&rank=quality&filters={quote(filters)}"
    response = viewer_client.get(url, HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert response.status_code == 422 and chinese in response.content.decode()
