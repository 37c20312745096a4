"""`serve`'s supervisor: a dead child is restarted after a growing backoff, and what it forked is killed first."""
import os
import sys

import pytest

from knowhub_site import supervisor
from knowhub_site.supervisor import Child, backoff_seconds
from tests.conftest import wait_for
from tests.faults.conftest import gone


@pytest.mark.parametrize("quick_failures, seconds", [(0, 1), (1, 1), (2, 2), (3, 4), (5, 16), (6, 30), (20, 30)])
def test_the_restart_backoff_doubles_up_to_a_cap(quick_failures, seconds):
    assert backoff_seconds(quick_failures) == seconds


# The parent forks a grandchild that would sleep on, then dies.
FORKS_AND_DIES = ["sh", "-c", "sleep 300 & echo $! > \"$1\"; exit 3", "sh"]


def test_a_dead_child_is_restarted_after_its_leftover_processes_are_killed(tmp_path, monkeypatch):
    monkeypatch.setattr(supervisor, "BACKOFF_FIRST_SECONDS", 0.2)
    lines, deaths = [], []
    pid_file = tmp_path / "grandchild.pid"
    child = Child("thing", FORKS_AND_DIES + [str(pid_file)], env={"PATH": "/usr/bin:/bin"}, log=lines.append,
                  on_death=deaths.append)
    child.start()
    first = child.proc.pid
    try:
        grandchild = int(wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), timeout=10,
                                  message="the grandchild"))
        wait_for(lambda: child.proc.poll() is not None, timeout=10, message="the child to exit")
        child.check()
        assert child.proc is None and deaths == [first] and child.restarts == 1
        assert lines == [f"thing (pid {first}) exited with code 3; killed 1 leftover process(es); restarting in 0.2s (restart 1)"]
        wait_for(lambda: gone(grandchild), timeout=5, message="the grandchild to be killed")
        wait_for(lambda: (child.check() or child.proc) is not None, timeout=5, message="the restart")
        assert child.proc.pid != first and lines[-1] == f"thing restarted (pid {child.proc.pid})"
    finally:
        child.stop()


def test_a_child_that_keeps_dying_waits_longer_each_time(tmp_path, monkeypatch):
    monkeypatch.setattr(supervisor, "BACKOFF_FIRST_SECONDS", 0.1)
    lines = []
    child = Child("crasher", [sys.executable, "-c", "raise SystemExit(1)"], env={}, log=lines.append)
    child.start()
    try:
        wait_for(lambda: child.check() or child.restarts == 3, timeout=30, interval=0.05, message="three restarts")
    finally:
        child.stop()
    delays = [line.split("restarting in ")[1].split("s ")[0] for line in lines if "restarting in" in line]
    assert delays == ["0.1", "0.2", "0.4"] and child.quick_failures == 3


def test_stop_ends_the_child_and_everything_in_its_group(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    child = Child("sleeper", ["sh", "-c", "sleep 300 & echo $! > \"$1\"; wait", "sh", str(pid_file)],
                  env={"PATH": "/usr/bin:/bin"}, log=print)
    child.start()
    grandchild = int(wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), timeout=10, message="grandchild"))
    child.stop()
    assert gone(child.proc.pid)
    wait_for(lambda: gone(grandchild), timeout=5, message="the grandchild to be killed")


def test_a_childs_output_is_appended_to_its_log_file_with_each_start_marked(tmp_path):
    log = tmp_path / "thing.log"
    child = Child("thing", ["sh", "-c", "echo out; echo err >&2"], env={"PATH": "/usr/bin:/bin"}, log=lambda line: None,
                  output=log)
    for _ in range(2):  # as a restart does
        child.start()
        child.proc.wait(10)
    lines = [line.split(" at ")[0] for line in log.read_text().splitlines()]
    assert lines == ["=== thing starting", "out", "err"] * 2


@pytest.mark.parametrize("to_a_log", [False, True])
def test_a_child_leads_its_own_process_group_in_the_supervisors_session(tmp_path, to_a_log):
    child = Child("sleeper", ["sleep", "300"], env={"PATH": "/usr/bin:/bin"}, log=lambda line: None,
                  output=tmp_path / "sleeper.log" if to_a_log else None)
    child.start()
    try:
        pid = child.proc.pid
        assert os.getpgid(pid) == pid != os.getpgid(0)  # Ctrl-C at a terminal (its foreground group) is not sent to it
        assert os.getsid(pid) == os.getsid(0)  # one session: one CPU group where the kernel groups by session
    finally:
        child.stop()
