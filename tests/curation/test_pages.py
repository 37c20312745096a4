"""Every page renders for a viewer; the list's search, filters, sort and pages work and live in the URL."""
import pytest

from tests.factories import make_knowledge, make_resource

pytestmark = pytest.mark.django_db


def test_every_page_renders_for_a_viewer(viewer_client):
    item = make_knowledge(task="Selenium login", resource_ids=[make_resource("code/login").id])
    for url in ["/", "/ranking/", "/knowledge/", f"/knowledge/{item.id}/", "/review/", "/resources/", "/resources/code/login/",
                "/playground/"]:
        response = viewer_client.get(url)
        assert response.status_code == 200, url


def test_every_get_page_answers_head_for_its_role(viewer_client, django_user_model):
    """Uptime checks and link checkers send HEAD: each page's answer without its body, never a 405."""
    from jobs.models import Job
    from knowledge import services
    from tests.callers import acting, person_in, session_client

    item = make_knowledge(task="Selenium login", resource_ids=[make_resource("code/login").id])
    services.knowledge_edit(acting(), knowledge_id=item.id, content="changed")
    job = Job.objects.create(kind="slim", status="succeeded", requested_by="user:carl", params={},
                             progress={"groups_found": 0}, result={"groups": []})
    pages = {viewer_client: ["/", "/ranking/", "/knowledge/", f"/knowledge/{item.id}/", "/review/", "/conflicts/",
                             f"/knowledge/{item.id}/reports/helpful/", f"/knowledge/{item.id}/explain/?q=login",
                             f"/knowledge/{item.id}/diff/?a=1&b=current", f"/jobs/{job.id}/", "/documents/",
                             "/resources/", "/resources/code/login/", "/playground/"],
             session_client(person_in(django_user_model, "curator", "carl")): ["/webhooks/"],
             session_client(person_in(django_user_model, "admin", "ada")): ["/audit/"]}
    for client, urls in pages.items():
        for url in urls:
            head = client.head(url)
            assert (head.status_code, head.content) == (200, b""), url
            assert client.get(url).status_code == 200, url


@pytest.mark.parametrize("template", ["400.html", "403.html", "403_csrf.html", "404.html", "500.html",
                                      "errors/refused.html"])
def test_error_pages_name_an_empty_favicon_so_the_browser_asks_for_none(template):
    from django.template.loader import render_to_string

    assert '<link rel="icon" href="data:,">' in render_to_string(template)


def test_a_404_and_a_403_page_name_an_empty_favicon(viewer_client):
    missing = viewer_client.get("/knowledge/knowledge-20000101-none/")
    refused = viewer_client.post("/review/find/")
    assert (missing.status_code, refused.status_code) == (404, 403)
    assert all(b'<link rel="icon" href="data:,">' in r.content for r in (missing, refused))
