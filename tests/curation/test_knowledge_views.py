"""Knowledge list and detail: live search, filters, sort, pages; inline edit, feedback, score, versions, explanation."""
from datetime import timedelta

import pytest
from django.utils import timezone

from knowledge.models import FeedbackCase, Knowledge
from tests.factories import make_knowledge

pytestmark = pytest.mark.django_db


def tasks_in(response) -> str:
    return response.content.decode()


def test_search_uses_the_engine_and_htmx_gets_only_the_results(viewer_client):
    make_knowledge(task="Selenium login with undetected_chromedriver", embed=False)
    make_knowledge(task="User prefers tabs", types=["user_profile"], embed=False)
    page = viewer_client.get("/knowledge/?q=chromedriver")
    assert "Selenium login" in tasks_in(page) and "User prefers tabs" not in tasks_in(page)
    assert "<html" in tasks_in(page)
    fragment = viewer_client.get("/knowledge/?q=chromedriver", HTTP_HX_REQUEST="true")
    assert "<html" not in tasks_in(fragment) and 'id="results"' in tasks_in(fragment)
    assert "Selenium login" in tasks_in(fragment)
    assert fragment["HX-Push-Url"] == "/knowledge/?q=chromedriver"  # empty filters left out of the shared URL
    filtered = viewer_client.get("/knowledge/?q=&types=tool&scopes=&sort=quality&page=", HTTP_HX_REQUEST="true")
    assert filtered["HX-Push-Url"] == "/knowledge/?types=tool&sort=quality"


@pytest.mark.parametrize("query, shown, hidden", [
    ("types=user_profile", "Tabs", "Selenium"),
    ("scopes=org:other", "Tabs", "Selenium"),
    ("tags=domain%3Dscraping", "Selenium", "Tabs"),
    ("owner=agent:other", "Tabs", "Selenium"),
    ("score_min=4&score_max=5", "Selenium", "Tabs"),
    ("status=archived", "Old advice", "Selenium"),
    ("q=tabs&types=user_profile", "Tabs", "Selenium"),
])
def test_filters_narrow_the_list(viewer_client, query, shown, hidden):
    make_knowledge(task="Selenium login", tags={"domain": "scraping"}, score=5, embed=False)
    make_knowledge(task="Tabs please", types=["user_profile"], scopes=["org:other"], owner="agent:other", score=2, embed=False)
    old = make_knowledge(task="Old advice", embed=False)
    Knowledge.objects.filter(pk=old.pk).update(status="archived")
    body = tasks_in(viewer_client.get(f"/knowledge/?{query}"))
    assert shown in body and hidden not in body


def test_sort_by_most_harmful_and_quality(viewer_client):
    make_knowledge(task="Fine item", harmful=0, helpful=4, embed=False)
    make_knowledge(task="Bad item", harmful=3, embed=False)
    body = tasks_in(viewer_client.get("/knowledge/?sort=harmful"))
    assert body.index("Bad item") < body.index("Fine item")
    body = tasks_in(viewer_client.get("/knowledge/?sort=quality"))
    assert body.index("Fine item") < body.index("Bad item")


def test_pages_keep_the_filters_in_their_links(viewer_client):
    for n in range(25):
        make_knowledge(task=f"Tool tip {n:02d}", embed=False)
    first = tasks_in(viewer_client.get("/knowledge/?types=tool&sort=newest"))
    assert "25 items" in first and "Page 1 of 2" in first
    assert "?types=tool&amp;sort=newest&amp;page=2" in first
    second = tasks_in(viewer_client.get("/knowledge/?types=tool&sort=newest&page=2"))
    assert "Tool tip 00" in second and "Tool tip 24" not in second


def test_bad_filter_is_422_naming_the_field(viewer_client):
    response = viewer_client.get("/knowledge/?score_min=9&tags=nonsense")
    assert response.status_code == 422
    body = tasks_in(response)
    assert "<strong>score_min</strong>" in body and "<strong>tags</strong>" in body and "not key=value" in body


def test_empty_list_says_what_to_do(viewer_client):
    assert "No knowledge matches" in tasks_in(viewer_client.get("/knowledge/"))


def test_detail_shows_fields_histories_and_the_explanation(viewer_client):
    item = make_knowledge(task="Selenium login", content="Use undetected_chromedriver.", tags={"domain": "scraping"},
                          helpful_history=[{"note": "worked on site A"}], harmful_history=[{"note": "broke on site B"}],
                          source={"name": "wiki", "urls": ["https://example.com/a"]}, embed=False)
    body = tasks_in(viewer_client.get(f"/knowledge/{item.id}/"))
    for text in ("Selenium login", "Use undetected_chromedriver.", "domain=scraping", "worked on site A", "broke on site B",
                 "https://example.com/a", "org:acme", "agent:research_agent", "No earlier versions yet"):
        assert text in body, text
    explained = tasks_in(viewer_client.get(f"/knowledge/{item.id}/explain/?q=chromedriver"))
    assert "candidate #1" in explained and "#1</strong> of the top" in explained
    low = make_knowledge(task="chromedriver tip nobody trusts", score=1, embed=False)
    explained = tasks_in(viewer_client.get(f"/knowledge/{low.id}/explain/?q=chromedriver"))
    assert "not returned" in explained and "left out: score 1 is below min_score 3" in explained
    assert viewer_client.get(f"/knowledge/{item.id}/explain/?q=").status_code == 422


def test_detail_of_a_missing_item_is_404(viewer_client):
    assert viewer_client.get("/knowledge/knowledge-20260101-zzzz/").status_code == 404


def test_edit_creates_a_version_and_swaps_the_content_in_place(curator_client):
    item = make_knowledge(task="Old task", content="Old content", embed=False)
    form = curator_client.get(f"/knowledge/{item.id}/edit/", HTTP_HX_REQUEST="true")
    assert 'name="content"' in tasks_in(form) and "Old content" in tasks_in(form)
    response = curator_client.post(f"/knowledge/{item.id}/edit/", {
        "task": "New task", "content": "New content", "tags": "domain=scraping", "types": ["tool", "plan"], "reason": "clearer"})
    body = tasks_in(response)
    assert response.status_code == 200 and "New content" in body and "kept as version 1" in body
    assert 'id="versions" class="card" hx-swap-oob="true"' in body
    item.refresh_from_db()
    assert (item.task, item.tags, item.types) == ("New task", {"domain": "scraping"}, ["tool", "plan"])
    version = item.versions.get()
    assert (version.number, version.content, version.changed_by, version.reason) == (1, "Old content", "user:carl", "clearer")


def test_invalid_edit_shows_errors_in_place_and_changes_nothing(curator_client):
    item = make_knowledge(task="Old task", embed=False)
    response = curator_client.post(f"/knowledge/{item.id}/edit/", {"task": "", "content": "x", "tags": "oops", "types": []})
    body = tasks_in(response)
    assert response.status_code == 422
    assert 'id="task-errors"' in body and 'id="tags-errors"' in body and 'id="types-errors"' in body
    assert "not key=value" in body
    assert Knowledge.objects.get(pk=item.id).task == "Old task" and not item.versions.exists()


def test_an_edit_with_a_tag_name_filters_cannot_name_is_refused_as_the_api_refuses_it(curator_client):
    item = make_knowledge(task="Old task", tags={"domain": "a"}, embed=False)
    response = curator_client.post(f"/knowledge/{item.id}/edit/", {
        "task": "New task", "content": "x", "tags": "$where=1", "types": ["tool"], "reason": "r"})
    assert response.status_code == 422 and 'id="tags-errors"' in tasks_in(response)
    assert "the names filters take" in tasks_in(response)
    assert Knowledge.objects.get(pk=item.id).tags == {"domain": "a"} and not item.versions.exists()


def test_an_item_whose_tag_names_predate_the_rule_is_edited_in_the_ui_with_them(curator_client):
    item = make_knowledge(task="Old task", tags={"领域": "编程"}, embed=False)
    response = curator_client.post(f"/knowledge/{item.id}/edit/", {
        "task": "Old task", "content": "fixed a typo", "tags": "领域=编程", "types": ["tool"], "reason": "typo"})
    assert response.status_code == 200, tasks_in(response)
    assert Knowledge.objects.get(pk=item.id).tags == {"领域": "编程"}
    listed = tasks_in(curator_client.get("/knowledge/?tags=领域=编程"))  # the list's tag filter finds it by that name
    assert "Old task" in listed


def test_feedback_and_score_update_the_counts_in_place(curator_client):
    item = make_knowledge(embed=False)
    response = curator_client.post(f"/knowledge/{item.id}/feedback/", {"kind": "harmful", "note": "wrong port"})
    body = tasks_in(response)
    assert '<strong id="harmful-count" class="num-bad">1</strong>' in body and "wrong port" in body
    assert "<html" not in body
    case = FeedbackCase.objects.get(knowledge=item)
    assert (case.kind, case.case["note"], case.reported_by) == ("harmful", "wrong port", "user:carl")
    body = tasks_in(curator_client.post(f"/knowledge/{item.id}/score/", {"score": "5"}))
    assert '<strong id="score-value">5</strong>' in body and "Score set." in body
    assert curator_client.post(f"/knowledge/{item.id}/score/", {"score": "9"}).status_code == 422
    assert curator_client.post(f"/knowledge/{item.id}/feedback/", {"kind": "meh"}).status_code == 422
    item.refresh_from_db()
    assert (item.harmful, item.score) == (1, 5)


def test_diff_between_any_two_versions_and_restore(curator_client):
    item = make_knowledge(task="T", content="line one\nline two", embed=False)
    curator_client.post(f"/knowledge/{item.id}/edit/", {"task": "T", "content": "line one\nline 2", "types": ["tool"]})
    curator_client.post(f"/knowledge/{item.id}/edit/", {"task": "T", "content": "line one\nline 2\nline three", "types": ["tool"]})
    diff = tasks_in(curator_client.get(f"/knowledge/{item.id}/diff/?a=1&b=current"))
    assert '<div class="removed">− line two</div>' in diff and '<div class="added">+ line three</div>' in diff
    between = tasks_in(curator_client.get(f"/knowledge/{item.id}/diff/?a=1&b=2"))
    assert '<div class="added">+ line 2</div>' in between and "line three" not in between
    bad = curator_client.get(f"/knowledge/{item.id}/diff/?a=7&b=current")
    assert bad.status_code == 422 and "no version “7”" in tasks_in(bad)

    restored = curator_client.post(f"/knowledge/{item.id}/restore/1/")
    assert "Restored version 1" in tasks_in(restored)
    item.refresh_from_db()
    assert item.content == "line one\nline two" and item.versions.count() == 3
    assert item.versions.first().content == "line one\nline 2\nline three"  # nothing lost
    assert curator_client.post(f"/knowledge/{item.id}/restore/99/").status_code == 404


def test_bad_filter_is_highlighted_in_place(viewer_client):
    response = viewer_client.get("/knowledge/?score_min=9&tags=nonsense&owner=agent:x")
    form = tasks_in(response).split('<form id="filters"')[1].split("</form>")[0]
    assert 'name="score_min" value="9" min="1" max="5" aria-invalid="true" aria-describedby="id_score_min_error"' in form
    assert '<ul class="errorlist" id="id_score_min_error"><li>Ensure this value is less than or equal to 5.</li></ul>' in form
    assert 'aria-invalid="true"' in form.split('id="filter-tags"')[1].split("</div>")[0]
    assert 'id="id_tags_error"><li>“nonsense” is not key=value</li>' in form
    assert 'aria-invalid' not in form.split('id="filter-owner"')[1].split("</div>")[0]  # only the wrong fields
    live = tasks_in(viewer_client.get("/knowledge/?tags=nonsense", HTTP_HX_REQUEST="true"))  # the form is out of band
    tags = live.split('<div id="filter-tags" hx-swap-oob="true">')[1].split("</div>")[0]
    assert 'aria-invalid="true"' in tags and "not key=value" in tags


def test_relevance_is_offered_only_with_a_query(viewer_client):
    make_knowledge(task="Older tip", created_at=timezone.now() - timedelta(days=1), embed=False)
    make_knowledge(task="Newer tip", embed=False)
    plain = tasks_in(viewer_client.get("/knowledge/"))
    assert '<option value="relevance"' not in plain and '<option value="" selected>Newest</option>' in plain
    assert plain.index('<option value="" selected>Newest') < plain.index('<option value="quality"')  # the default, first
    searched = tasks_in(viewer_client.get("/knowledge/?q=tip"))
    assert '<option value="relevance"' in searched
    live = tasks_in(viewer_client.get("/knowledge/?q=tip", HTTP_HX_REQUEST="true"))  # typing a query offers it
    assert '<div id="filter-sort" hx-swap-oob="true">' in live and '<option value="relevance"' in live
    stale = viewer_client.get("/knowledge/?sort=relevance")  # an old link: the default sort, not an error
    assert stale.status_code == 200
    assert tasks_in(stale).index("Newer tip") < tasks_in(stale).index("Older tip")


def test_edit_refreshes_the_updated_field(curator_client):
    item = make_knowledge(task="T", content="Old", embed=False, created_at=timezone.now() - timedelta(days=3))
    before = f"<dt>Updated</dt><dd>{item.updated_at:%Y-%m-%d %H:%M}</dd>"
    assert before in tasks_in(curator_client.get(f"/knowledge/{item.id}/"))
    body = tasks_in(curator_client.post(f"/knowledge/{item.id}/edit/", {"task": "T", "content": "New", "types": ["tool"]}))
    item.refresh_from_db()
    fields = body.split('<section id="fields" class="card" hx-swap-oob="true">')[1].split("</section>")[0]
    assert f"<dt>Updated</dt><dd>{item.updated_at:%Y-%m-%d %H:%M}</dd>" in fields and before not in fields
    restored = tasks_in(curator_client.post(f"/knowledge/{item.id}/restore/1/"))
    assert '<section id="fields" class="card" hx-swap-oob="true">' in restored


def test_an_edit_with_a_tag_value_over_the_limit_is_refused_in_place(curator_client):
    item = make_knowledge(task="Old task", tags={"domain": "a"}, embed=False)
    response = curator_client.post(f"/knowledge/{item.id}/edit/", {
        "task": "New task", "content": "x", "tags": "domain=" + "v" * 501, "types": ["tool"]}, HTTP_HX_REQUEST="true")
    body = tasks_in(response)
    assert response.status_code == 422 and 'id="tags-errors"' in body
    assert "Tags: tag domain: a value has at most 500 characters" in body
    assert Knowledge.objects.get(pk=item.id).tags == {"domain": "a"} and not item.versions.exists()
    assert curator_client.post(f"/knowledge/{item.id}/edit/", {  # the limit itself is taken, as the API takes it
        "task": "New task", "content": "x", "tags": "domain=" + "v" * 500, "types": ["tool"]}).status_code == 200


def test_an_edit_the_operation_refuses_is_said_in_place_and_changes_nothing(curator_client):
    """What the form cannot check (here a deployment's filter naming the field) is the form's error, not a 500."""
    from agents.chain import Continue, Error, Filter, registered_temporarily

    item = make_knowledge(task="Old task", embed=False)
    refusing = Filter("policy", "pre_invocation", lambda ctx: Error("content: no secrets here", fields={
        "content": ["no secrets here"]}) if ctx["operation"] == "knowledge_edit" else Continue(ctx))
    with registered_temporarily(refusing):
        response = curator_client.post(f"/knowledge/{item.id}/edit/", {
            "task": "New task", "content": "password=1", "types": ["tool"]}, HTTP_HX_REQUEST="true")
    body = tasks_in(response)
    assert response.status_code == 422 and 'id="content-errors"' in body and "Content: no secrets here" in body
    assert Knowledge.objects.get(pk=item.id).task == "Old task" and not item.versions.exists()


def test_a_save_from_a_form_opened_before_another_save_is_refused_in_place_with_the_current_text(
        curator_client, client, django_user_model):
    """Two curators open the same item's form; the second save, from the stale form, must not undo the first."""
    import re

    from tests.curation.conftest import user_in

    item = make_knowledge(task="Two tabs item", content="original content", embed=False)
    opened = tasks_in(curator_client.get(f"/knowledge/{item.id}/edit/", HTTP_HX_REQUEST="true"))
    base = re.search(r'<input type="hidden" name="base_updated_at" value="([^"]+)"', opened).group(1)
    other = client.__class__()
    other.force_login(user_in(django_user_model, "curator", "cora"))
    first = other.post(f"/knowledge/{item.id}/edit/", {"task": "Two tabs item", "content": "original content + A's fix",
                                                       "types": ["tool"], "base_updated_at": base})
    assert first.status_code == 200

    stale = curator_client.post(f"/knowledge/{item.id}/edit/", {
        "task": "Two tabs item (renamed by B)", "content": "original content", "types": ["tool"], "reason": "B",
        "base_updated_at": base}, HTTP_HX_REQUEST="true")

    body = tasks_in(stale)
    assert stale.status_code == 409 and 'id="edit-stale"' in body and "changed since you opened it" in body
    assert "original content + A&#x27;s fix</textarea>" in body  # the form holds the current text
    assert "<pre>Two tabs item (renamed by B)</pre>" in body  # and the unsaved change, to redo
    item.refresh_from_db()
    assert (item.task, item.content, item.versions.count()) == ("Two tabs item", "original content + A's fix", 1)
    new_base = re.search(r'name="base_updated_at" value="([^"]+)"', body).group(1)
    redone = curator_client.post(f"/knowledge/{item.id}/edit/", {
        "task": "Two tabs item (renamed by B)", "content": "original content + A's fix", "types": ["tool"],
        "base_updated_at": new_base}, HTTP_HX_REQUEST="true")
    assert redone.status_code == 200
    item.refresh_from_db()
    assert (item.task, item.content) == ("Two tabs item (renamed by B)", "original content + A's fix")
