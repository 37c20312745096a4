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
