import pytest
from django.db import connection

from resources.models import Resource

pytestmark = pytest.mark.django_db

SECRET = "账号:user@example.com\n密码:SecurePass123"


def raw_secure_body(resource_id: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT secure_body FROM resources_resource WHERE id = %s", [resource_id])
        return cursor.fetchone()[0]


def test_secret_is_not_stored_in_plaintext():
    Resource.objects.create(id="credentials/website_a", title="t", content_type="credential", secure_body=SECRET)
    raw = raw_secure_body("credentials/website_a")
    assert "SecurePass123" not in raw and "user@example.com" not in raw
    assert Resource.objects.get(pk="credentials/website_a").secure_body == SECRET


def test_empty_secret_stays_empty():
    Resource.objects.create(id="code/x", title="t", content_type="code")
    assert raw_secure_body("code/x") == ""


@pytest.mark.parametrize("bad_id", ["/leading", "trailing/", "a//b", "has space", "../up", ""])
def test_resource_ids_must_be_path_like(bad_id):
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError, match="resource_id_path_like"), transaction.atomic():
        Resource.objects.create(id=bad_id, title="t")


def test_key_rotation_round_trips_and_is_resumable(settings):
    import io

    from cryptography.fernet import Fernet
    from django.core.management import call_command

    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.KNOWHUB_ENCRYPTION_KEYS = [old]
    for i in range(5):
        Resource.objects.create(id=f"credentials/site_{i}", title="t", content_type="credential", secure_body=f"{SECRET} #{i}")
    before = {i: raw_secure_body(f"credentials/site_{i}") for i in range(5)}

    settings.KNOWHUB_ENCRYPTION_KEYS = [new, old]  # the first encrypts, all decrypt
    out = io.StringIO()
    call_command("rotate_encryption_keys", stdout=out)
    assert "5 of 5 secrets re-encrypted" in out.getvalue()
    after = {i: raw_secure_body(f"credentials/site_{i}") for i in range(5)}
    assert all(before[i] != after[i] and SECRET not in after[i] for i in range(5))
    assert Fernet(new.encode()).decrypt(after[0].encode()).decode() == f"{SECRET} #0"

    settings.KNOWHUB_ENCRYPTION_KEYS = [new]  # the old key can now be dropped
    assert [r.secure_body for r in Resource.objects.order_by("id")] == [f"{SECRET} #{i}" for i in range(5)]
    out = io.StringIO()
    call_command("rotate_encryption_keys", stdout=out)
    assert "0 of 5 secrets re-encrypted" in out.getvalue()  # a second run has nothing left to do


def test_rotation_stops_clearly_when_no_key_fits(settings):
    from cryptography.fernet import Fernet
    from django.core.management import call_command
    from django.core.management.base import CommandError

    settings.KNOWHUB_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]
    Resource.objects.create(id="credentials/x", title="t", secure_body=SECRET)
    settings.KNOWHUB_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]
    with pytest.raises(CommandError, match="credentials/x: no configured key"):
        call_command("rotate_encryption_keys")
