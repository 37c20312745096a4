"""A killed worker (main process or pool child) under `manage.py serve`: the web keeps answering,
the worker comes back, nothing of the dead one runs on, and the job finishes exactly once.

Figures (recovery times) are printed; run with `-s` to see them.
"""
import os
import signal
import subprocess
import sys

import psutil
import pytest

from jobs.models import Job
from knowledge.models import Knowledge, KnowledgeVersion
from tests.conftest import REPO_ROOT, CeleryWorker, wait_for
from tests.faults.conftest import gone, timed

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

NEW = {"task": "new task", "content": "new content", "summary_of_changes": "s"}


def start_evolve_mid_llm_call(stack, token, fake_openai) -> tuple[str, str]:
    """An item and its evolve job, whose first LLM call hangs (the worker is mid-job); the next call succeeds."""
    status, item = stack.request("POST", "/api/knowledge", {"task": "old task", "content": "old content", "types": ["tool"]}, token)
    assert status == 201, item
    fake_openai.stall(60)
    fake_openai.reply_json(NEW)
    status, body = stack.request("PUT", f"/api/knowledge/{item['id']}", {"evolve_feedback": "improve"}, token)
    assert status == 200, body
    wait_for(lambda: fake_openai.requests, timeout=60, message="the worker to call the LLM")
    return item["id"], body["job"]["id"]


def job_status(stack, token, job_id):
    return stack.request("GET", f"/api/jobs/{job_id}", token=token)[1] or {}


def assert_finished_exactly_once(stack, token, item_id, job_id, fake_openai):
    job = job_status(stack, token, job_id)
    assert job["status"] == "succeeded" and job["attempts"] == 2, job
    assert KnowledgeVersion.objects.filter(knowledge_id=item_id).count() == 1
    assert Knowledge.objects.get(pk=item_id).content == "new content"
    assert len(fake_openai.requests) == 2  # the killed call and the one re-sent: no third copy ran


def test_sigkill_of_the_worker_main_process_restarts_it_reaps_its_children_and_finishes_the_job_once(
        running_stack, agent_token, fake_openai):
    stack = running_stack
    item_id, job_id = start_evolve_mid_llm_call(stack, agent_token, fake_openai)
    old = stack.worker()
    old_pids = [old.pid] + [p.pid for p in old.children(recursive=True)]
    assert len(old_pids) >= 3  # main, pool child, embedded beat

    os.kill(old.pid, signal.SIGKILL)
    web_answers = []

    def recovered():
        web_answers.append(stack.request("GET", f"/api/knowledge/{item_id}", token=agent_token)[0])
        return job_status(stack, agent_token, job_id).get("status") in ("succeeded", "failed")

    job_seconds = timed(recovered, timeout=120, message="the job to be re-sent and finish")
    assert set(web_answers) == {200}  # the web server never stopped answering
    new = stack.worker()
    assert new is not None and new.pid != old.pid
    wait_for(lambda: all(gone(pid) for pid in old_pids), timeout=10, message="every process of the dead worker to end")
    assert_finished_exactly_once(stack, agent_token, item_id, job_id, fake_openai)
    assert Job.objects.get(pk=job_id).worker.split("/")[1] == str(new.pid)
    healthz_seconds = timed(lambda: stack.healthz()[0] == 200, timeout=30, message="/healthz to recover")
    assert f"worker (pid {old.pid}) exited with code -9" in stack.output() and "restart 1)" in stack.output()
    print(f"\nmain SIGKILL: job succeeded {job_seconds:.1f}s after the kill; /healthz 200 {healthz_seconds:.1f}s later; "
          f"{len(web_answers)} API calls during recovery, all 200")

    assert stack.stop() == 0  # SIGTERM still stops it cleanly after a restart
    assert all(gone(pid) for pid in stack._seen)


def test_sigkill_of_a_pool_child_mid_job_finishes_the_job_once(running_stack, agent_token, fake_openai):
    stack = running_stack
    item_id, job_id = start_evolve_mid_llm_call(stack, agent_token, fake_openai)
    main = stack.worker()
    child = wait_for(lambda: stack.process_talking_to(fake_openai.server.server_address[1]), timeout=10,
                     message="the pool child mid-call")
    assert child.pid != main.pid

    os.kill(child.pid, signal.SIGKILL)
    seconds = timed(lambda: job_status(stack, agent_token, job_id).get("status") in ("succeeded", "failed"),
                    timeout=120, message="the redelivered job to finish")
    assert_finished_exactly_once(stack, agent_token, item_id, job_id, fake_openai)
    assert stack.worker().pid == main.pid  # the worker itself lived on
    print(f"\npool child SIGKILL: job succeeded {seconds:.1f}s after the kill")


def test_the_web_server_is_restarted_when_it_dies(running_stack, agent_token):
    stack = running_stack
    web = stack.web()
    web_pids = [web.pid] + [p.pid for p in web.children(recursive=True)]
    os.kill(web.pid, signal.SIGKILL)
    seconds = timed(lambda: stack.healthz()[0] == 200 and stack.web() is not None and stack.web().pid != web.pid,
                    timeout=90, message="a new web server to answer")
    assert all(gone(pid) for pid in web_pids)
    assert stack.request("GET", "/api/knowledge", token=agent_token)[0] == 200
    print(f"\nweb SIGKILL: answering again after {seconds:.1f}s")


class WorkerWithBeat(CeleryWorker):
    """A worker with the embedded beat, as `serve` runs it."""

    def __init__(self, *, schedule, **kwargs):
        super().__init__(**kwargs)
        self.schedule = schedule

    def start(self) -> "WorkerWithBeat":
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "knowhub_site", "worker", "--loglevel", "warning", "--concurrency", "1",
             "--pool", "prefork", "--hostname", self.hostname, "--beat", "--schedule", str(self.schedule)],
            cwd=REPO_ROOT, env=self.env, start_new_session=True,
        )
        return self


def test_the_busy_pool_child_and_the_beat_of_a_worker_killed_outside_serve_die_with_it(fake_openai, tmp_path):
    """No supervisor kills the process group here: the children's PR_SET_PDEATHSIG does.

    An idle pool child would exit anyway (its pipe to the parent closes); a busy
    one, and the embedded beat, would run on.
    """
    from knowledge.tasks import run_evolve
    from tests.factories import make_knowledge

    worker = WorkerWithBeat(name="unsupervised", schedule=tmp_path / "beat-schedule", extra_env={
        "OPENAI_BASE_URL": fake_openai.base_url, "OPENAI_API_KEY": "test-key", "KNOWHUB_LLM_MODEL": "fake-model"}).start()
    children = []
    try:
        main = psutil.Process(worker.proc.pid)
        job = Job.objects.create(kind="evolve", subject=make_knowledge(embed=False).id, requested_by="x",
                                 params={"feedback": "f", "model": "fake-model"})
        fake_openai.stall(60)
        run_evolve.delay(str(job.id))
        wait_for(lambda: fake_openai.requests, timeout=60, message="the pool child to call the LLM")
        children = wait_for(lambda: len(main.children()) == 2 and main.children(), timeout=30, message="pool child and beat")
        os.kill(main.pid, signal.SIGKILL)  # only the main process, not its group
        worker.proc.wait()
        wait_for(lambda: all(gone(c.pid) for c in children), timeout=10, message="the pool child and the beat to die")
    finally:
        worker.stop()
        for child in children:
            if not gone(child.pid):
                child.kill()
