"""The Webhooks page in Debian's chromium (Playwright), at a desktop and a phone size: subscribe, see a failed
delivery with its response code, re-send it, pause and resume."""
import os

import pytest
from django.contrib.auth.models import Group

from curation.screenshots import LANGUAGES, log_in, use_language
from knowledge import services
from tests.callers import acting
from tests.webhooks.conftest import inline_sends, webhook_settings  # noqa: F401 - fixtures
from tests.webhooks.receiver import Receiver

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("inline_sends")]
PASSWORD = "pw-for-webhook-tests"


@pytest.fixture
def page(sized_page):
    return sized_page


def test_a_curator_subscribes_sees_a_failed_delivery_and_re_sends_it(page, live_server, django_user_model,
                                                                      webhook_settings):
    webhook_settings.KNOWHUB_WEBHOOK_RETRY_DELAYS = []
    user = django_user_model.objects.create_user(username="carl", password=PASSWORD)
    user.groups.add(Group.objects.get(name="curator"))
    with Receiver(statuses=[500, 200]) as receiver:
        log_in(page, live_server.url, "carl", PASSWORD)
        page.get_by_role("link", name="Webhooks").click()
        page.wait_for_selector("#no-webhooks")
        page.fill("#id_url", receiver.url)
        page.check("input[value='knowledge.created']")
        page.fill("#id_scopes", "org:acme")
        page.get_by_role("button", name="Subscribe").click()
        secret = page.locator(".webhook-new-secret").inner_text(timeout=10_000)
        assert secret.startswith("whsec_")
        assert page.locator("#subscriptions .webhook").count() == 1

        services.knowledge_create(acting(), task="Rotate the staging keys", content="c", types=["tool"],
                                  scopes=["org:acme"])
        page.reload()
        page.wait_for_selector("table.deliveries .badge.failed")
        assert "500" in page.locator("table.deliveries tbody tr").first.inner_text()
        width = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert width[0] <= width[1], f"the page scrolls sideways: {width}"
        if os.environ.get("KNOWHUB_SCREENSHOTS") and page.viewport_size["width"] > 1000:
            for language, suffix in LANGUAGES.items():
                use_language(page, live_server.url, language)
                page.reload()
                page.wait_for_selector("table.deliveries .badge.failed")
                page.screenshot(path=os.path.join(os.environ["KNOWHUB_SCREENSHOTS"], f"webhooks{suffix}.png"),
                                full_page=True)
            use_language(page, live_server.url, "en")
            page.reload()
            page.wait_for_selector("table.deliveries .badge.failed")

        page.get_by_role("button", name="Re-send").click()
        page.wait_for_selector("table.deliveries .badge.succeeded")
        assert "Re-sent" in page.locator(".webhook").inner_text()
        assert len(receiver.received) == 2

    page.get_by_role("button", name="Pause").click()
    page.wait_for_selector(".webhook .badge.paused")
    assert "paused by user:carl" in page.locator(".webhook-paused-reason").inner_text()
    page.get_by_role("button", name="Resume").click()
    page.wait_for_selector(".webhook .badge.active")
