import pytest

from core.env import env_bool, env_int, env_list, persistent_secret


@pytest.mark.parametrize(("raw", "expected"), [("1", True), ("true", True), ("Yes", True), ("0", False), ("off", False), ("", False)])
def test_env_bool_reads_common_spellings(monkeypatch, raw, expected):
    monkeypatch.setenv("X_FLAG", raw)
    assert env_bool("X_FLAG") is expected


def test_env_bool_refuses_junk_with_the_variable_name(monkeypatch):
    monkeypatch.setenv("X_FLAG", "maybe")
    with pytest.raises(ValueError, match="X_FLAG"):
        env_bool("X_FLAG")


def test_env_int_refuses_junk_with_the_variable_name(monkeypatch):
    monkeypatch.setenv("PORT", "eighty")
    with pytest.raises(ValueError, match="PORT"):
        env_int("PORT", 8000)


def test_env_list_splits_and_trims(monkeypatch):
    monkeypatch.setenv("ALLOWED_HOSTS", " a.example , b.example,, ")
    assert env_list("ALLOWED_HOSTS", []) == ["a.example", "b.example"]


def test_persistent_secret_is_random_private_and_stable(tmp_path):
    first = persistent_secret(tmp_path / "k")
    assert persistent_secret(tmp_path / "k") == first
    assert persistent_secret(tmp_path / "other") != first
    assert (tmp_path / "k").stat().st_mode & 0o777 == 0o600


def test_production_refuses_to_start_without_its_own_keys():
    import os
    import subprocess
    import sys

    from tests.conftest import REPO_ROOT

    env = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "KNOWHUB_ENCRYPTION_KEYS", "DATABASE_URL")}
    env.update(KNOWHUB_ENV="production", DJANGO_SETTINGS_MODULE="knowhub_site.settings")
    result = subprocess.run([sys.executable, "-c", "import django; django.setup()"], cwd=REPO_ROOT, env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "KNOWHUB_ENV=production needs SECRET_KEY, KNOWHUB_ENCRYPTION_KEYS, DATABASE_URL set" in result.stderr
