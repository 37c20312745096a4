"""KNOWHUB_ENV=production is HTTPS-only by default, each setting overridable (issue 12, item 9)."""
import os
import secrets
import subprocess
import sys

import pytest
from cryptography.fernet import Fernet

from tests.conftest import REPO_ROOT, database_url_for_subprocess

pytestmark = pytest.mark.django_db
HTTPS_WARNINGS = ["security.W004", "security.W008", "security.W012", "security.W016"]


def production_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SECURE_", "SESSION_", "CSRF_", "KNOWHUB_"))}
    env.update(KNOWHUB_ENV="production", DJANGO_SETTINGS_MODULE="knowhub_site.settings",
               SECRET_KEY=secrets.token_urlsafe(50), KNOWHUB_ENCRYPTION_KEYS=Fernet.generate_key().decode(),
               DATABASE_URL=database_url_for_subprocess(), ALLOWED_HOSTS="hub.example.com", **extra)
    return env


def deploy_check(**extra) -> str:
    result = subprocess.run([sys.executable, "manage.py", "check", "--deploy"], cwd=REPO_ROOT, env=production_env(**extra),
                            capture_output=True, text=True, timeout=120)
    return result.stdout + result.stderr


def production_setting(expression: str, **extra) -> str:
    code = f"import django; django.setup(); from django.conf import settings; print(repr({expression}))"
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=production_env(**extra),
                            capture_output=True, text=True, timeout=120, check=True)
    return result.stdout.strip()


def test_production_passes_the_deploy_check_for_https():
    output = deploy_check()
    assert "System check identified" in output or "no issues" in output, output
    assert [w for w in HTTPS_WARNINGS if w in output] == [], output


def test_each_https_default_can_be_turned_off_by_env():
    output = deploy_check(SECURE_HSTS_SECONDS="0", SECURE_SSL_REDIRECT="false", SESSION_COOKIE_SECURE="false",
                          CSRF_COOKIE_SECURE="false")
    assert [w for w in HTTPS_WARNINGS if w in output] == HTTPS_WARNINGS, output


def test_behind_a_proxy_its_forwarded_scheme_is_trusted():
    assert production_setting("getattr(settings, 'SECURE_PROXY_SSL_HEADER', None)") == "None"
    assert production_setting("settings.SECURE_PROXY_SSL_HEADER", KNOWHUB_BEHIND_PROXY="true") == \
        "('HTTP_X_FORWARDED_PROTO', 'https')"


def test_the_https_redirect_spares_the_health_check(client, settings):
    settings.SECURE_SSL_REDIRECT = True
    assert client.get("/login/").status_code == 301
    assert client.get("/healthz").status_code in (200, 503)  # answered over plain HTTP, up or not


def test_the_https_redirect_spares_the_metrics_scrape_which_still_checks_who_asks(client, settings):
    settings.SECURE_SSL_REDIRECT = True
    settings.KNOWHUB_METRICS_TOKEN = "scrape-token"
    settings.KNOWHUB_METRICS_ALLOW = []
    assert client.get("/metrics").status_code == 403
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-token").status_code == 200
