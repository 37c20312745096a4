"""Logins are throttled per account and per address, on /login/ and the admin login (issue 12, item 8)."""
from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.core.management import call_command
from django.test import Client

from curation.throttle import client_address, cooloff_minutes

pytestmark = pytest.mark.django_db
PASSWORD = "pw-for-throttle-tests"


@pytest.fixture
def carl(django_user_model):
    return django_user_model.objects.create_user(username="carl", password=PASSWORD, is_staff=True, is_superuser=True)


def log_in(username, password, *, address="203.0.113.7", url="/login/"):
    browser = Client(REMOTE_ADDR=address)
    response = browser.post(url, {"username": username, "password": password})
    return response, browser


def logged_in(browser) -> bool:
    return "_auth_user_id" in browser.session


def test_five_wrong_passwords_lock_the_account_so_the_right_one_is_refused(carl, settings):
    assert settings.AXES_FAILURE_LIMIT == 5
    for _ in range(4):
        assert log_in("carl", "wrong")[0].status_code == 200  # the form again, with its error
    locked, _ = log_in("carl", "wrong")
    assert locked.status_code == 429
    response, browser = log_in("carl", PASSWORD)
    assert response.status_code == 429 and not logged_in(browser)
    page = response.content.decode()
    assert "Too many failed logins" in page and "Try again in 15 minutes" in page and "ask an admin" in page


def test_the_account_stays_locked_from_another_address(carl):
    for n in range(5):
        log_in("carl", "wrong", address=f"198.51.100.{n}")
    response, browser = log_in("carl", PASSWORD, address="192.0.2.99")
    assert response.status_code == 429 and not logged_in(browser)


def test_one_address_guessing_many_accounts_is_locked_but_others_log_in(carl):
    for n in range(5):
        log_in(f"guess{n}", "wrong", address="203.0.113.66")
    assert log_in("carl", PASSWORD, address="203.0.113.66")[0].status_code == 429
    response, browser = log_in("carl", PASSWORD, address="192.0.2.10")
    assert response.status_code == 302 and logged_in(browser)


def test_the_admin_login_is_throttled_too(carl):
    for _ in range(5):
        log_in("carl", "wrong", url="/admin/login/")
    response, browser = log_in("carl", PASSWORD, url="/admin/login/")
    assert response.status_code == 429 and not logged_in(browser)
    assert "Too many failed logins" in response.content.decode()


def test_a_successful_login_starts_the_count_again(carl):
    for _ in range(4):
        log_in("carl", "wrong")
    assert log_in("carl", PASSWORD)[0].status_code == 302
    for _ in range(4):
        log_in("carl", "wrong")
    response, browser = log_in("carl", PASSWORD)
    assert response.status_code == 302 and logged_in(browser)


def test_the_lock_lifts_after_the_cool_off(carl):
    for _ in range(5):
        log_in("carl", "wrong")
    AccessAttempt.objects.update(attempt_time=AccessAttempt.objects.get().attempt_time - timedelta(minutes=16))
    response, browser = log_in("carl", PASSWORD)
    assert response.status_code == 302 and logged_in(browser)


def test_an_admin_unlocks_an_account_with_the_management_command(carl):
    for n in range(5):
        log_in("carl", "wrong", address=f"198.51.100.{n}")
    call_command("axes_reset_username", "carl")
    response, browser = log_in("carl", PASSWORD, address="192.0.2.1")
    assert response.status_code == 302 and logged_in(browser)


def test_attempts_and_lockouts_are_listed_in_the_admin(carl):
    admin = Client()
    admin.force_login(carl)  # before the failures: a login clears them
    for _ in range(5):
        log_in("carl", "wrong")
    page = admin.get("/admin/axes/accessattempt/").content.decode()
    assert "carl" in page and "203.0.113.7" in page


class Request:
    def __init__(self, **meta):
        self.META = meta


@pytest.mark.parametrize("behind_proxy, proxies, meta, address", [
    (False, 1, {"REMOTE_ADDR": "10.0.0.5", "HTTP_X_FORWARDED_FOR": "1.2.3.4"}, "10.0.0.5"),
    (True, 1, {"REMOTE_ADDR": "10.0.0.5", "HTTP_X_FORWARDED_FOR": "203.0.113.9"}, "203.0.113.9"),
    (True, 1, {"REMOTE_ADDR": "10.0.0.5", "HTTP_X_FORWARDED_FOR": "6.6.6.6, 203.0.113.9"}, "203.0.113.9"),
    (True, 2, {"REMOTE_ADDR": "10.0.0.5", "HTTP_X_FORWARDED_FOR": "6.6.6.6, 203.0.113.9, 10.0.0.4"}, "203.0.113.9"),
    (True, 1, {"REMOTE_ADDR": "10.0.0.5"}, "10.0.0.5"),
])
def test_the_throttle_counts_the_address_the_nearest_proxy_saw_never_a_spoofed_one(settings, behind_proxy, proxies, meta, address):
    settings.KNOWHUB_BEHIND_PROXY, settings.KNOWHUB_PROXY_COUNT = behind_proxy, proxies
    assert client_address(Request(**meta)) == address


@pytest.mark.parametrize("cooloff, minutes", [
    (timedelta(minutes=15), 15), (timedelta(seconds=61), 2), (timedelta(seconds=5), 1), (None, None),
])
def test_the_lockout_message_rounds_the_cool_off_up_to_minutes(cooloff, minutes):
    assert cooloff_minutes(cooloff) == minutes
