"""Layout in Debian's chromium (Playwright) at a desktop (1280x800) and a phone (390x844) size.

What a new user ran into: the knowledge item page wider than a phone (title and restore buttons cut off),
the dashboard chart tiny on a phone with its last label cut, the admin knowledge list's quality column clipped.
"""
import pytest
from django.contrib.auth.models import Group

from curation.screenshots import log_in
from knowledge import services
from tests.callers import acting
from tests.curation.demo import make_demo
from tests.factories import make_knowledge

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "pw-for-layout-tests"


@pytest.fixture
def page(sized_page):
    return sized_page


@pytest.fixture
def demo(django_user_model):
    user = django_user_model.objects.create_user(username="carl", password=PASSWORD)
    user.groups.add(Group.objects.get(name="curator"))
    django_user_model.objects.create_superuser(username="admin", password=PASSWORD)
    return make_demo()


def no_horizontal_scroll(page):
    widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], f"the page scrolls sideways: {widths[0]} px wide in a {widths[1]} px window"


def inside_viewport(page, locator, what):
    width = page.evaluate("window.innerWidth")
    assert locator.count() > 0, f"no {what}"
    for i in range(locator.count()):
        el = locator.nth(i)
        el.scroll_into_view_if_needed()
        box = page.evaluate("e => { const r = e.getBoundingClientRect(); return [r.left, r.right]; }", el.element_handle())
        assert 0 <= box[0] and box[1] <= width, f"{what} #{i} spans {box} in a {width} px window"


def test_the_knowledge_item_page_fits_the_window(page, live_server, demo):
    item = demo["items"][0]  # one version by carl already; one more by an agent, whose name has no break
    services.knowledge_edit(acting("agent:research_agent_with_a_long_name"), knowledge_id=item.id,
                            reason="merged_the_notes_of_three_runs_into_one", content=item.content + " Keep the cookies.")
    log_in(page, live_server.url, "carl", PASSWORD)
    page.goto(f"{live_server.url}/knowledge/{item.id}/")
    page.wait_for_load_state("networkidle")
    no_horizontal_scroll(page)
    inside_viewport(page, page.locator("#content h1"), "title")
    inside_viewport(page, page.locator("#versions button:has-text('Restore this version')"), "restore button")


def test_the_dashboard_chart_uses_the_width_and_shows_its_last_label(page, live_server, demo):
    log_in(page, live_server.url, "carl", PASSWORD)
    page.wait_for_load_state("networkidle")
    no_horizontal_scroll(page)
    chart = page.locator("svg.chart:visible").first  # a phone gets its own drawing (charts.PHONE_WIDTH)
    geometry = page.evaluate("""svg => {
        const box = svg.getBoundingClientRect(), card = svg.parentElement, style = getComputedStyle(card);
        const inner = card.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
        const labels = [...svg.querySelectorAll('g text')].map(t => t.getBoundingClientRect());
        const last = labels[labels.length - 1];
        return {box: [box.left, box.right, box.width, box.height], inner, label: [last.left, last.right, last.height],
                font: parseFloat(getComputedStyle(svg.querySelector('g text')).fontSize) * box.width / svg.viewBox.baseVal.width};
    }""", chart.element_handle())
    left, right, width, height = geometry["box"]
    assert width >= geometry["inner"] - 1, f"the chart is {width} px wide in a {geometry['inner']} px card"
    assert height >= 150, f"the chart is a {height:.0f} px strip"
    assert left <= geometry["label"][0] and geometry["label"][1] <= right, f"the last label {geometry['label']} leaves the chart {geometry['box']}"
    assert geometry["label"][2] > 0, "the last label is not drawn"
    assert geometry["font"] >= 9, f"the chart's labels are {geometry['font']:.1f} px high on the screen: unreadable"


def test_the_admin_knowledge_list_shows_the_quality_column(page, live_server, demo):
    make_knowledge(task="Summarise the nightly crawl", types=["tool", "strategy", "usecase", "user_profile"],
                   owner="agent:knowledge_gardener_nightly_run")  # the widest cells a real list has
    log_in(page, live_server.url, "admin", PASSWORD)
    for order in ("", "?o=-7"):  # as it opens (sorted by id), and sorted by quality: a sorted header is wider
        page.goto(f"{live_server.url}/admin/knowledge/knowledge/{order}")
        the_quality_column_is_visible(page)
        assert ("sorted" in page.get_attribute("#result_list th.column-quality", "class")) == bool(order)


def the_quality_column_is_visible(page):
    header = page.locator("#result_list th.column-quality")
    assert header.count() == 1
    width = page.evaluate("window.innerWidth")
    if width >= 1280:
        no_horizontal_scroll(page)
        overflow = page.evaluate("""() => { const c = document.querySelector('#changelist');
            return [...c.querySelectorAll('*')].filter(e => e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflowX !== 'visible')
                .map(e => [e.id || e.className, e.scrollWidth, e.clientWidth]); }""")
        assert not overflow, f"the changelist scrolls sideways at {width} px: {overflow}"
        inside_viewport(page, header, "quality header")
        right = page.evaluate("document.querySelector('#changelist .results').getBoundingClientRect().right")
        assert header.bounding_box()["x"] + header.bounding_box()["width"] <= right + 0.5, "the quality column is clipped"
        inside_viewport(page, page.locator("#result_list td.field-quality"), "quality cell")
    else:  # a phone: the table may scroll inside its own box, the page must not
        no_horizontal_scroll(page)
