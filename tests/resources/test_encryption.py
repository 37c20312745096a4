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


def raw_column(table: str, column: str, pk) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {column} FROM {table} WHERE id = %s", [pk])
        return cursor.fetchone()[0]


def test_rotation_covers_earlier_versions_and_webhook_secrets_so_the_old_key_can_be_dropped(settings, monkeypatch):
    import io

    from cryptography.fernet import Fernet
    from django.core.management import call_command

    from resources.management.commands import rotate_encryption_keys
    from resources.models import ResourceVersion
    from resources.services import resource_save_version
    from tests.callers import acting
    from webhooks.models import Subscription

    monkeypatch.setattr(rotate_encryption_keys, "BATCH", 2)  # several batches per table, bigint/uuid/text keys alike
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.KNOWHUB_ENCRYPTION_KEYS = [old]
    Resource.objects.create(id="credentials/site", title="t", content_type="credential", secure_body=f"{SECRET} v1")
    for n in (2, 3, 4):
        resource_save_version(acting("agent:ops"), resource_id="credentials/site", title="t",
                              secure_body=f"{SECRET} v{n}", content_type="credential")
    subscriptions = {Subscription.objects.create(url=f"https://hooks.example.com/{i}", event_types=["knowledge.created"],
                                                 created_by="admin").pk: f"whsec_{i}" for i in range(3)}
    for pk, secret in subscriptions.items():
        Subscription.objects.filter(pk=pk).update(secret=secret)  # a known value, encrypted under the old key
    versions = dict(ResourceVersion.objects.values_list("number", "secure_body"))
    assert versions == {1: f"{SECRET} v1", 2: f"{SECRET} v2", 3: f"{SECRET} v3"}
    before = {("resources_resourceversion", n): raw_column("resources_resourceversion", "secure_body", pk)
              for n, pk in ResourceVersion.objects.values_list("number", "pk")}
    before |= {("webhooks_subscription", pk): raw_column("webhooks_subscription", "secret", pk) for pk in subscriptions}

    settings.KNOWHUB_ENCRYPTION_KEYS = [new, old]
    out = io.StringIO()
    call_command("rotate_encryption_keys", stdout=out)
    report = out.getvalue()
    assert "resources_resource.secure_body: 1 of 1 re-encrypted" in report
    assert "resources_resourceversion.secure_body: 3 of 3 re-encrypted" in report
    assert "webhooks_subscription.secret: 3 of 3 re-encrypted" in report
    assert "7 of 7 secrets re-encrypted under the newest key." in report
    for n, pk in ResourceVersion.objects.values_list("number", "pk"):
        raw = raw_column("resources_resourceversion", "secure_body", pk)
        assert raw != before["resources_resourceversion", n] and "SecurePass123" not in raw
    for pk in subscriptions:
        assert raw_column("webhooks_subscription", "secret", pk) != before["webhooks_subscription", pk]

    settings.KNOWHUB_ENCRYPTION_KEYS = [new]  # the old key dropped: every secret still reads back
    assert Resource.objects.get(pk="credentials/site").secure_body == f"{SECRET} v4"
    assert dict(ResourceVersion.objects.values_list("number", "secure_body")) == versions
    assert dict(Subscription.objects.values_list("pk", "secret")) == subscriptions
    out = io.StringIO()
    call_command("rotate_encryption_keys", stdout=out)  # a second run leaves values under the newest key alone
    assert "0 of 7 secrets re-encrypted" in out.getvalue()


def test_rotation_is_all_or_nothing_per_batch_and_resumes(settings, monkeypatch):
    from cryptography.fernet import Fernet
    from django.core.management import call_command
    from django.core.management.base import CommandError

    from resources.management.commands import rotate_encryption_keys

    monkeypatch.setattr(rotate_encryption_keys, "BATCH", 2)
    old, new, stray = (Fernet.generate_key().decode() for _ in range(3))
    settings.KNOWHUB_ENCRYPTION_KEYS = [old]
    for i in range(4):
        Resource.objects.create(id=f"credentials/site_{i}", title="t", secure_body=f"{SECRET} #{i}")
    settings.KNOWHUB_ENCRYPTION_KEYS = [stray]
    Resource.objects.create(id="credentials/site_1b", title="t", secure_body="under a key about to be lost")
    raw = {i: raw_secure_body(f"credentials/site_{i}") for i in range(4)}

    settings.KNOWHUB_ENCRYPTION_KEYS = [new, old]  # site_1b opens the second batch, before site_2
    with pytest.raises(CommandError, match=r"resources_resource.secure_body credentials/site_1b: no configured key"):
        call_command("rotate_encryption_keys")
    newest = Fernet(new.encode())
    assert [newest.decrypt(raw_secure_body(f"credentials/site_{i}").encode()).decode() for i in (0, 1)] == \
        [f"{SECRET} #0", f"{SECRET} #1"]  # the first batch committed
    assert raw_secure_body("credentials/site_2") == raw[2]  # the failing batch wrote nothing
    assert raw_secure_body("credentials/site_3") == raw[3]  # and the run stopped there

    with connection.cursor() as cursor:  # its key is lost: the operator removes the row (a delete would decrypt it)
        cursor.execute("DELETE FROM resources_resource WHERE id = 'credentials/site_1b'")
    call_command("rotate_encryption_keys")  # the rerun finishes the job
    settings.KNOWHUB_ENCRYPTION_KEYS = [new]
    assert [r.secure_body for r in Resource.objects.order_by("id")] == [f"{SECRET} #{i}" for i in range(4)]


def test_rotation_discovers_every_encrypted_field_of_every_model():
    """A new EncryptedTextField anywhere is rotated without a change to the command: if discovery missed
    one, dropping the old key after a rotation would lose its values."""
    from django.apps import apps

    from resources.fields import EncryptedTextField
    from resources.management.commands.rotate_encryption_keys import encrypted_columns

    every_field = {
        (model._meta.db_table, field.column)
        for model in apps.get_models(include_auto_created=True)
        for field in model._meta.get_fields(include_hidden=True)
        if isinstance(field, EncryptedTextField)
    }
    rotated = [(c.table, c.column) for c in encrypted_columns()]
    assert len(rotated) == len(set(rotated))  # each column once
    assert set(rotated) == every_field
    assert {("resources_resource", "secure_body"), ("resources_resourceversion", "secure_body"),
            ("webhooks_subscription", "secret")} <= every_field
