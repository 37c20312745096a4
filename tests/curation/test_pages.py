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
