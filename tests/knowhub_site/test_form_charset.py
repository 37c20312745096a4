"""A page's form in an encoding other than UTF-8: a 400 page before any view or CSRF check reads it, never an
exception escaping Django (its own 400 and 500 views read the form again, and raised again)."""
import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("content_type", [
    "application/x-www-form-urlencoded; charset=utf-16",
    "application/x-www-form-urlencoded; charset=latin-1",
    "multipart/form-data",  # no boundary: a body Django cannot split
])
@pytest.mark.parametrize("path", ["/login/", "/knowledge/", "/review/approve/"])
def test_a_form_posted_in_another_charset_is_a_400_page(path, content_type):
    client = Client(enforce_csrf_checks=True)
    client.get("/login/")

    response = client.generic("POST", path, data=b"username=a&password=b", content_type=content_type,
                              HTTP_X_CSRFTOKEN=client.cookies["csrftoken"].value)

    assert response.status_code == 400
    assert b"Bad request" in response.content


def test_a_utf8_form_still_reaches_its_view():
    client = Client(enforce_csrf_checks=True)
    client.get("/login/")
    response = client.post("/login/", data=b"username=a&password=b",
                           content_type="application/x-www-form-urlencoded; charset=UTF-8",
                           HTTP_X_CSRFTOKEN=client.cookies["csrftoken"].value)
    assert response.status_code == 200  # the login page again, with its form's error
