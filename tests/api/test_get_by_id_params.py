"""GET by id takes only the query parameters it declares, each once: a typo such as `?revael=true` is a 400 naming
it, not an answer without the secret."""
import pytest

from jobs.models import Job
from tests.callers import agent_client
from tests.factories import make_knowledge

pytestmark = pytest.mark.django_db


@pytest.fixture
def paths():
    keeper = agent_client("vault_agent", ["org:acme"], writable_scopes=["org:acme"], can_read_secrets=True)
    saved = keeper.post("/api/resource", {"id": "credentials/a", "title": "A", "body": "b", "secure_body": "pw",
                                          "content_type": "credential"}, format="json")
    assert saved.status_code == 201, saved.content
    item = make_knowledge(task="t", content="c", scopes=["org:acme"], embed=False)
    job = Job.objects.create(kind="evolve", subject=item.id, requested_by="agent:vault_agent")
    return keeper, {"resource": "/api/resource/credentials/a", "knowledge": f"/api/knowledge/{item.id}",
                    "job": f"/api/jobs/{job.id}"}


@pytest.mark.parametrize("path", ["resource", "knowledge", "job"])
@pytest.mark.parametrize("query, named", [("foo=1", "foo"), ("revael=true", "revael")])
def test_an_unknown_query_parameter_is_a_400_naming_it(paths, path, query, named):
    client, urls = paths
    assert client.get(urls[path]).status_code == 200
    refused = client.get(f"{urls[path]}?{query}")
    assert refused.status_code == 400 and list(refused.json()["error"]["fields"]) == [named], refused.content


def test_a_repeated_reveal_is_a_400_naming_it_and_reveals_nothing(paths):
    client, urls = paths
    refused = client.get(f"{urls['resource']}?reveal=true&reveal=false")
    assert refused.status_code == 400 and list(refused.json()["error"]["fields"]) == ["reveal"]
    assert "pw" not in refused.content.decode()
    assert client.get(f"{urls['resource']}?reveal=true").json()["secure_body"] == "pw"
