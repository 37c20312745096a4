"""Each curation page runs the same number of queries however many rows it shows (issue 14: no N+1).

Every test renders a page over a few rows, then over many more (items with reports, links, versions,
conflicts, proposals, jobs, audit rows...), and compares the queries run. A query per row shows up as
a difference in the count; the failure message lists the queries of both renders.
"""
import itertools
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agents.audit import audit_record
from ingest.models import Document
from jobs.models import Job
from knowledge.feedback import feedback_record
from knowledge.models import Conflict, Knowledge, KnowledgeVersion, MergeProposal
from knowledge.search_log import search_log_record
from resources.models import ResourceVersion, RevealEvent
from tests.callers import acting
from tests.factories import make_knowledge, make_resource
from webhooks.models import Delivery, Subscription

pytestmark = pytest.mark.django_db

_serial = itertools.count()
MORE = 30


def grow(count: int, *, words: str = "retry flaky requests") -> list[Knowledge]:
    """`count` more items, each with helpful and harmful reports, two linked resources, two earlier versions, an open
    conflict and a pending merge proposal with the item before it, a failed evolve job, a judged search, audit rows,
    a secret reveal, a document and a webhook delivery."""
    items = []
    for _ in range(count):
        n = next(_serial)
        resources = [make_resource(f"code/tool-{n}-{i}", secure_body=f"s3cret-{n}", content_type="credential").id
                     for i in range(2)]
        item = make_knowledge(task=f"How to {words} {n}", content=f"Back off and {words}; attempt {n}.",
                              types=["tool", "strategy"], tags={"project": f"p{n % 3}"}, resource_ids=resources,
                              helpful_history=[{"note": f"worked {n}"}], harmful_history=[{"note": f"broke {n}"}],
                              helpful=1, harmful=1, embed=False)
        for version in (1, 2):
            KnowledgeVersion.objects.create(knowledge=item, number=version, task=f"old task {version}", content="old",
                                            changed_by="agent:research_agent", reason=f"edit {version}")
        log = search_log_record(principal="agent:a", readable_scopes=["org:acme"], query=words, top_k=5, min_score=3,
                                types=None, scopes=None, rank="quality", filters=None, result_ids=[item.id])
        feedback_record(acting(), knowledge_id=item.id, helpful=True, search_id=log.pk)
        if items:
            first, second = sorted([items[-1].id, item.id])
            conflict = Conflict.objects.create(first_id=first, second_id=second, kind="duplicate", detected_for=item.id)
            MergeProposal.objects.create(ids=[first, second], task="merged", content="merged", conflict=conflict)
        Job.objects.create(kind="evolve", subject=item.id, status="failed", error=f"LLM said no {n}",
                           requested_by="user:carl", finished_at=timezone.now())
        audit_record(principal="agent:research_agent", operation="knowledge_save", target=item.id)
        audit_record(principal="agent:research_agent", operation="resource_save", target=resources[0])
        RevealEvent.objects.create(principal="user:ada", resource_id=resources[0])
        ResourceVersion.objects.create(resource_id=resources[0], number=1, title="old", content_type="credential",
                                       replaced_by="agent:research_agent")
        Document.objects.create(origin="upload", uri=f"doc-{n}.md", kind="markdown", scopes=["org:acme"], types=["tool"],
                                chunk_size=1200, chunk_overlap=150, requested_by="user:carl", status="done",
                                items=[item.id])
        hook = Subscription.objects.create(url=f"https://8.8.8.8/hooks/{n}", event_types=["knowledge.created"],
                                           scopes=["org:acme"], created_by="user:carl")
        Delivery.objects.create(subscription=hook, event_id=f"msg_{n}", event_type="knowledge.created",
                                payload={"type": "knowledge.created", "data": {}}, status="failed", attempts=1)
        items.append(item)
    return items


def grow_around(item: Knowledge, count: int) -> None:
    """`count` more of everything the item's page shows: reports, versions, linked resources, items merged into it
    and items it superseded, open conflicts, evolve jobs."""
    base = KnowledgeVersion.objects.filter(knowledge=item).count()
    for i in range(count):
        n = next(_serial)
        feedback_record(acting(), knowledge_id=item.id, helpful=i % 3 != 0, case={"note": f"report {n}"})
        KnowledgeVersion.objects.create(knowledge=item, number=base + i + 1, task=f"old {n}", content="old",
                                        changed_by="agent:research_agent", reason=f"edit {n}")
        Job.objects.create(kind="evolve", subject=item.id, status="succeeded", requested_by="user:carl")
    for other in grow(max(1, count // 10)):
        first, second = sorted([item.id, other.id])
        Conflict.objects.get_or_create(first_id=first, second_id=second,
                                       defaults={"kind": "contradiction", "detected_for": other.id})
    merged = make_knowledge(task=f"Merged original {next(_serial)}", embed=False)
    Knowledge.objects.filter(pk=merged.pk).update(status="merged", merged_into=item)
    superseded = make_knowledge(task=f"Superseded original {next(_serial)}", embed=False)
    Knowledge.objects.filter(pk=superseded.pk).update(status="superseded", superseded_by=item)


def queries_of(client, url: str, **headers) -> list[str]:
    """The SQL a second render of `url` runs (the first fills per-process caches: word statistics, content types)."""
    client.get(url, **headers)
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url, **headers)
    assert response.status_code == 200, (url, response.status_code)
    return [query["sql"] for query in captured.captured_queries]


def assert_same_count(before: list[str], after: list[str]) -> None:
    listing = "\n".join(f"  {sql[:200]}" for sql in after)
    assert len(after) == len(before), f"{len(before)} queries before, {len(after)} after growing:\n{listing}"


LISTS = {
    "knowledge list": "/knowledge/",
    "knowledge list, a later page": "/knowledge/?page=2",
    "knowledge list, filtered and sorted": "/knowledge/?types=tool&scopes=org:acme&tags=project%3Dp1&score_min=1&sort=quality",
    "knowledge list, every status": "/knowledge/?status=any&sort=harmful",
    "dashboard": "/",
    "dashboard's ranking panel": "/ranking/",
    "merge review": "/review/",
    "conflicts": "/conflicts/",
    "conflicts, all": "/conflicts/?status=all",
    "resources": "/resources/",
    "documents": "/documents/",
    "webhooks": "/webhooks/",
}


@pytest.mark.parametrize("url", LISTS.values(), ids=LISTS.keys())
def test_list_pages_run_the_same_queries_for_many_rows(curator_client, url):
    grow(3)
    before = queries_of(curator_client, url)
    grow(MORE)
    assert_same_count(before, queries_of(curator_client, url))


@pytest.mark.parametrize("htmx", [False, True], ids=["page", "htmx partial"])
def test_knowledge_search_runs_the_same_queries_for_many_matches(curator_client, htmx):
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    url = "/knowledge/?q=retry+flaky+requests&types=tool"
    grow(3)
    before = queries_of(curator_client, url, **headers)
    grow(MORE)
    after = queries_of(curator_client, url, **headers)
    assert_same_count(before, after)
    assert "How to retry flaky requests" in curator_client.get(url, **headers).content.decode()


def test_knowledge_list_htmx_partial_runs_the_same_queries_for_many_rows(curator_client):
    url = "/knowledge/?types=tool&sort=quality"
    grow(3)
    before = queries_of(curator_client, url, HTTP_HX_REQUEST="true")
    grow(MORE)
    assert_same_count(before, queries_of(curator_client, url, HTTP_HX_REQUEST="true"))


def test_the_dashboard_reads_no_search_log_and_its_ranking_panel_reads_them_in_one_query(curator_client):
    grow(3)
    assert not [sql for sql in queries_of(curator_client, "/") if "knowledge_searchlog" in sql]
    before = queries_of(curator_client, "/ranking/", HTTP_HX_REQUEST="true")
    grow(MORE)
    after = queries_of(curator_client, "/ranking/", HTTP_HX_REQUEST="true")
    assert_same_count(before, after)
    assert len([sql for sql in after if "knowledge_searchlog" in sql]) == 1


def test_audit_page_runs_the_same_queries_for_many_rows(admin_client_):
    grow(3)
    before = queries_of(admin_client_, "/audit/")
    grow(MORE)
    assert_same_count(before, queries_of(admin_client_, "/audit/"))


def test_detail_page_runs_the_same_queries_however_long_its_histories(curator_client):
    item = grow(2)[-1]
    grow_around(item, 3)
    url = f"/knowledge/{item.id}/"
    before = queries_of(curator_client, url)
    grow_around(item, MORE)
    assert_same_count(before, queries_of(curator_client, url))


def test_version_diff_and_resource_detail_run_the_same_queries_for_many_rows(curator_client):
    item = grow(2)[-1]
    resource = item.resource_links.first().resource_id
    urls = [f"/knowledge/{item.id}/diff/?a=1&b=current", f"/resources/{resource}/"]
    before = [queries_of(curator_client, url) for url in urls]
    grow_around(item, MORE)
    for n in range(MORE):
        other = make_knowledge(task=f"Also uses {resource} {n}", resource_ids=[resource], embed=False)
        KnowledgeVersion.objects.create(knowledge=other, number=1, task="old", content="old", changed_by="x")
        ResourceVersion.objects.create(resource_id=resource, number=n + 2, title="old", content_type="credential",
                                       replaced_by="agent:research_agent")
    for url, counted in zip(urls, before):
        assert_same_count(counted, queries_of(curator_client, url))


def _reports(item: Knowledge, *, helpful: int, harmful: int) -> None:
    """Many reports at once (as many agents would send them one by one), oldest first, numbered in their notes."""
    from knowledge.models import FeedbackCase

    FeedbackCase.objects.bulk_create(
        [FeedbackCase(knowledge=item, kind="helpful", case={"note": f"helped #{n}"}) for n in range(helpful)]
        + [FeedbackCase(knowledge=item, kind="harmful", case={"note": f"hurt #{n}"}) for n in range(harmful)])


def test_detail_page_shows_the_newest_reports_and_links_to_all_of_them(curator_client):
    from curation.views.knowledge import REPORTS_PER_PAGE, REPORTS_SHOWN

    item = make_knowledge(task="Much reported advice", embed=False)
    _reports(item, helpful=1200, harmful=3)
    body = curator_client.get(f"/knowledge/{item.id}/").content.decode()
    helpful = body.split("<h3>Helpful history</h3>")[1].split("<h3>Harmful history</h3>")[0]
    shown = [f"helped #{n}" for n in range(1200 - REPORTS_SHOWN, 1200)]
    assert all(f"note: {note}<" in helpful for note in shown)
    assert "note: helped #1189<" not in helpful and helpful.count('<div class="meta">') == REPORTS_SHOWN
    assert helpful.index("helped #1199") < helpful.index("helped #1190")  # newest first
    assert f"The {REPORTS_SHOWN} newest reports of 1,200." in helpful
    assert f'href="/knowledge/{item.id}/reports/helpful/"' in helpful
    harmful = body.split("<h3>Harmful history</h3>")[1].split("</section>")[0]
    assert harmful.count("note: hurt #") == 3 and "newest reports of" not in harmful and "/reports/harmful/" not in harmful

    first = curator_client.get(f"/knowledge/{item.id}/reports/helpful/").content.decode()
    assert "1,200 reports, newest first" in first and first.count("note: helped #") == REPORTS_PER_PAGE
    assert "note: helped #1199<" in first and "Page 1 of 24" in first and 'href="?page=2"' in first
    last = curator_client.get(f"/knowledge/{item.id}/reports/helpful/?page=24").content.decode()
    assert "note: helped #0<" in last and "note: helped #49<" in last and "note: helped #50<" not in last
    assert "hurt #" not in first + last
    assert curator_client.get(f"/knowledge/{item.id}/reports/helpful/?page=999").status_code == 200  # the last page
    assert curator_client.get(f"/knowledge/{item.id}/reports/useful/").status_code == 404


def test_reports_page_runs_the_same_queries_however_many_reports(curator_client):
    item = make_knowledge(task="Reported advice", embed=False)
    _reports(item, helpful=5, harmful=1)
    url = f"/knowledge/{item.id}/reports/helpful/?page=1"
    before = queries_of(curator_client, url)
    _reports(item, helpful=300, harmful=50)
    assert_same_count(before, queries_of(curator_client, url))


def test_detail_page_shows_the_newest_versions_and_all_on_request(curator_client):
    from curation.views.knowledge import VERSIONS_SHOWN

    item = make_knowledge(task="Often edited", embed=False)
    KnowledgeVersion.objects.bulk_create(
        KnowledgeVersion(knowledge=item, number=n, task=f"task {n}", content=f"text {n}", changed_by="x", reason=f"why {n}")
        for n in range(1, 61))
    versions = curator_client.get(f"/knowledge/{item.id}/").content.decode().split('<section id="versions"')[1]
    versions = versions.split("</section>")[0]
    assert "<td>v60</td>" in versions and f"<td>v{61 - VERSIONS_SHOWN}</td>" in versions
    assert f"<td>v{60 - VERSIONS_SHOWN}</td>" not in versions
    assert f"The {VERSIONS_SHOWN} newest versions of 60." in versions and "?versions=all#versions" in versions
    every = curator_client.get(f"/knowledge/{item.id}/?versions=all").content.decode().split('<section id="versions"')[1]
    assert "<td>v1</td>" in every and "newest versions of" not in every.split("</section>")[0]
    diff = curator_client.get(f"/knowledge/{item.id}/diff/?a=1&b=60").content.decode()  # any two, shown or not
    assert "− text 1" in diff and "+ text 60" in diff
    assert curator_client.get(f"/knowledge/{item.id}/diff/?a=61&b=current").status_code == 422


def test_resource_page_shows_its_newest_versions(curator_client):
    resource = make_resource("code/often-saved")
    ResourceVersion.objects.bulk_create(
        ResourceVersion(resource=resource, number=n, title=f"title {n}", content_type="code", replaced_by="x")
        for n in range(1, 31))
    body = curator_client.get("/resources/code/often-saved/").content.decode()
    assert "v30 · title 30" in body and "v11 · title 11" in body and "v10 · title 10" not in body
    assert "The 20 newest versions of 30." in body
    assert "v1 · title 1 " in curator_client.get("/resources/code/often-saved/?versions=all").content.decode()


def test_a_long_list_is_counted_up_to_a_bound_and_still_pages_to_its_end(curator_client, monkeypatch):
    monkeypatch.setattr("curation.views.common.COUNT_UP_TO", 30)
    base = timezone.now() - timedelta(days=1)
    for n in range(45):
        make_knowledge(task=f"Tip {n:02d}", created_at=base + timedelta(minutes=n), embed=False)
    first = curator_client.get("/knowledge/").content.decode()
    assert "more than 30 items" in first and "Page 1<" in first and "Page 1 of" not in first
    assert "Tip 44" in first and 'page=2" ' in first
    last = curator_client.get("/knowledge/?page=3").content.decode()  # past the bound: the pager goes on
    assert "Tip 00" in last and "Tip 04" in last and "Tip 05" not in last and "rel=\"next\"" not in last
    beyond = curator_client.get("/knowledge/?page=40").content.decode()  # past the end: the last page
    assert "Tip 00" in beyond and "Page 3<" in beyond
    narrow = curator_client.get("/knowledge/?q=&owner=agent:research_agent&score_min=3&sort=newest").content.decode()
    assert "more than 30 items" in narrow
    few = curator_client.get("/knowledge/?status=archived").content.decode()
    assert "0 items" in few
