import pytest

from tests.callers import ensure_roles, person_in


@pytest.fixture(autouse=True)
def roles(request):
    """The role groups; a transactional test before this one flushed the migration's rows."""
    if "django_db_setup" not in request.fixturenames and not request.node.get_closest_marker("django_db"):
        return
    request.getfixturevalue("_django_db_helper")
    ensure_roles()


def user_in(django_user_model, role: str, username: str):
    return person_in(django_user_model, role, username)


@pytest.fixture
def viewer(django_user_model):
    return user_in(django_user_model, "viewer", "vera")


@pytest.fixture
def curator_user(django_user_model):
    return user_in(django_user_model, "curator", "carl")


@pytest.fixture
def admin_user(django_user_model):
    return user_in(django_user_model, "admin", "ada")


@pytest.fixture
def viewer_client(client, viewer):
    client.force_login(viewer)
    return client


@pytest.fixture
def curator_client(client, curator_user):
    client.force_login(curator_user)
    return client


@pytest.fixture
def admin_client_(client, admin_user):
    client.force_login(admin_user)
    return client


@pytest.fixture(scope="module")
def chromium():
    """Debian's chromium under Playwright, one per test module (fails, never skips, when it is missing)."""
    import os

    # Playwright's sync API runs an event loop in this thread; the ORM calls of the test itself are still synchronous.
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import sync_playwright

    from curation.screenshots import launch

    with sync_playwright() as p:
        browser = launch(p)
        yield browser
        browser.close()


# The sizes the layout-sensitive browser tests run at (each such test runs at both, as `sized_page`).
SIZES = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}


@pytest.fixture(params=list(SIZES))
def sized_page(request, chromium):
    """A checked page (below) at a desktop and at a phone size."""
    yield from checked_page(chromium, SIZES[request.param])


def checked_page(chromium, viewport, **context_options):
    """For a page fixture (`yield from`): a page in a fresh context at `viewport`; hx-confirm dialogs accepted; the
    test fails on any JavaScript error. Playwright's wait_for_function evaluates its string with eval, which the
    Content-Security-Policy forbids, so the policy is bypassed here; test_xss_browser.py drives pages under it.
    `context_options` go to the browser context (e.g. `locale="zh-CN"`: the Accept-Language it sends)."""
    context = chromium.new_context(viewport=viewport, bypass_csp=True, **context_options)
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("dialog", lambda dialog: dialog.accept())  # hx-confirm
    yield page
    context.close()
    assert not errors, f"JavaScript errors: {errors}"
