"""What tests must change, and nothing more."""
from urllib.parse import urlsplit, urlunsplit

from knowhub_site import embedded_db
from knowhub_site.settings import *  # noqa: F403
from knowhub_site.settings import DATABASE_URL, DATABASES, STATIC_ROOT, _broker_from_database, env_bool, env_str

# Tests render templates without running collectstatic first.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise warns when it is missing
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# Conflict detection would put its own LLM calls between a test's and its loopback LLM: tests that
# exercise it turn it on (in process with `settings`, in a worker with extra_env).
KNOWHUB_CONFLICT_DETECTION = env_bool("KNOWHUB_CONFLICT_DETECTION", False)
# A thread counting a base's keyword statistics again has a connection of its own, which cannot see a test's
# uncommitted rows: an expired entry is counted by the search. Tests of the thread turn it on.
KNOWHUB_STATISTICS_REFRESH_IN_BACKGROUND = False


def _with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))


# Tasks sent by tests go to a broker database of their own, never to the dev
# database's queue (where a running `make run` worker would take them).
if not env_str("CELERY_BROKER_URL"):
    _broker_db = DATABASES["default"]["TEST"]["NAME"] + "_broker"
    embedded_db.ensure_database(_with_database(DATABASE_URL, "postgres"), _broker_db)
    CELERY_BROKER_URL = _broker_from_database(_with_database(DATABASE_URL, _broker_db))
