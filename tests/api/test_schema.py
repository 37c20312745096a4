import pytest
from django.core.management import call_command
from rest_framework.test import APIClient


def test_openapi_schema_generates_without_warnings_and_validates(tmp_path):
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))


@pytest.mark.django_db
def test_schema_and_docs_are_served_and_list_every_endpoint():
    client = APIClient()
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    assert schema["openapi"].startswith("3.")
    assert {"/api/knowledge", "/api/knowledge/search", "/api/knowledge/{knowledge_id}", "/api/knowledge/batch_update",
            "/api/knowledge/filters", "/api/resource", "/api/resource/{resource_id}", "/api/knowledge/slim", "/api/jobs/{job_id}"} <= set(schema["paths"])
    assert "BearerToken" in schema["components"]["securitySchemes"]
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    page = docs.content.decode()
    assert "swagger-ui" in page and "cdn" not in page.lower() and "/static/drf_spectacular_sidecar/" in page
