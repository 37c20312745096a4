"""GET /api/jobs/{id} as each token of one agent: the token's scopes decide, not the agent id they share."""
import pytest

from knowledge import evolve, slim
from tests.callers import acting, agent_client
from tests.factories import make_knowledge

pytestmark = pytest.mark.django_db


def test_another_token_of_the_requesting_agent_cannot_read_a_job_about_an_item_outside_its_scopes(fake_openai):
    item = make_knowledge(task="Rotate the keys", content="Use the vault CLI.", scopes=["team:rev"], embed=False)
    job = evolve.evolve_request(acting("agent:rev", readable_scopes=("team:rev",), writable_scopes=("team:rev",)),
                                knowledge_id=item.id, feedback="mention the audit log")

    assert agent_client("rev", ["team:rev"]).get(f"/api/jobs/{job.id}").status_code == 200
    assert agent_client("rev", ["team:z"]).get(f"/api/jobs/{job.id}").status_code == 404


def test_a_slim_job_is_read_by_its_requesting_agent_only_through_a_token_reading_every_scope_it_works_over(fake_openai):
    job = slim.slim_request(acting("agent:rev", readable_scopes=("team:rev",), writable_scopes=("team:rev",)),
                            model=None, dry_run=True)

    assert agent_client("rev", ["team:rev", "team:z"]).get(f"/api/jobs/{job.id}").status_code == 200
    assert agent_client("rev", ["team:z"]).get(f"/api/jobs/{job.id}").status_code == 404
    assert agent_client("other", ["team:rev"]).get(f"/api/jobs/{job.id}").status_code == 404
