"""The conflict review and evolve under review in Debian's chromium (Playwright), at desktop and phone sizes:
a curator supersedes the older of two contradicting items and reopens the conflict; accepts a reviewed rewrite."""
import pytest
from django.contrib.auth.models import Group

from curation.screenshots import log_in
from jobs.models import Job
from knowledge.models import Conflict, Knowledge
from tests.factories import make_knowledge

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "pw-for-conflict-tests"


@pytest.fixture
def page(sized_page):
    return sized_page


@pytest.fixture
def curator(django_user_model):
    user = django_user_model.objects.create_user(username="carl", password=PASSWORD)
    user.groups.add(Group.objects.get(name="curator"))
    return user


def test_a_curator_supersedes_the_older_item_and_reopens_the_conflict(page, live_server, curator):
    older = make_knowledge(task="Liveness probe", content="The liveness probe must not check the database.", embed=False)
    newer = make_knowledge(task="Liveness probe", content="Make the liveness probe check the database.", embed=False)
    first, second = sorted([older.id, newer.id])
    conflict = Conflict.objects.create(first_id=first, second_id=second, kind="contradiction", detected_for=newer.id,
                                       explanation="One forbids what the other requires.")
    log_in(page, live_server.url, "carl", PASSWORD)
    page.goto(f"{live_server.url}/conflicts/")
    card = page.locator(f"#conflict-{conflict.id}")
    assert "One forbids what the other requires." in card.inner_text()
    width = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert width[0] <= width[1], f"the conflicts page scrolls sideways: {width}"

    card.get_by_role("button", name="Newer supersedes older").click()
    page.locator(f"#conflict-{conflict.id} >> text=Done: superseded").wait_for()
    assert Knowledge.objects.get(pk=older.id).superseded_by_id == newer.id

    page.goto(f"{live_server.url}/knowledge/{older.id}/")
    assert f"Superseded by {newer.id}" in page.locator("#content").inner_text()
    page.goto(f"{live_server.url}/knowledge/{newer.id}/")
    assert older.id in page.locator("#fields").inner_html()  # "Replaces" lists it

    page.goto(f"{live_server.url}/conflicts/?status=superseded")
    page.locator(f"#conflict-{conflict.id}").get_by_role("button", name="Reopen").click()
    page.locator(f"#conflict-{conflict.id} >> text=Reopened").wait_for()
    assert Knowledge.objects.get(pk=older.id).status == "active"
    page.goto(f"{live_server.url}/conflicts/")
    assert page.locator(f"#conflict-{conflict.id}").count() == 1


def test_a_curator_accepts_a_reviewed_rewrite_and_the_item_page_shows_it(page, live_server, curator):
    item = make_knowledge(task="Log in to site A", content="Use the stored password.", embed=False)
    job = Job.objects.create(kind="evolve", subject=item.id, requested_by="user:carl", status="succeeded",
                             params={"feedback": "captcha", "model": "fake", "review": True},
                             result={"knowledge_id": item.id, "review": "pending", "summary_of_changes": "captcha step",
                                     "proposal": {"task": "Log in to site A despite the captcha", "content": "Solve the captcha first."},
                                     "based_on": __import__("knowledge.evolve", fromlist=["_text_hash"])._text_hash(item.task, item.content)})
    log_in(page, live_server.url, "carl", PASSWORD)
    page.goto(f"{live_server.url}/knowledge/{item.id}/")
    page.get_by_role("link", name="show").click()
    page.get_by_role("button", name="Accept").click()
    page.locator("text=Accepted (now live)").wait_for()
    assert "Solve the captcha first." in page.locator("#item-content").inner_text()
    assert page.get_by_role("button", name="Accept").count() == 0
    assert Knowledge.objects.get(pk=item.id).content == "Solve the captcha first."
