"""Keep the stack's processes running: restart one that dies, and reap what it leaves behind.

Used by `manage.py serve`. Each child leads its own process group (so Ctrl-C in
a terminal, sent to the foreground group, reaches only the supervisor): when a
child dies, killing that group ends whatever it had forked (a Celery worker's
pool children, gunicorn's workers) before a new one starts. The children stay
in the supervisor's session: where the kernel groups CPU time by session
(autogroups), they share one group, so a thread's priority counts against the
stack's other processes (the model service's passages, at nice 19, yield to the
web servers and the worker; PostgreSQL's processes each run in a session of their
own) instead of only within its own process. No child reads the terminal: as a
background group it would be stopped for it.
Only a stop request (Ctrl-C, SIGTERM) ends the supervision. A child's output
goes to its log file (var/logs/<name>.log, appended, each start marked), so the
terminal shows only what the supervisor has to say.
"""
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import psutil

BACKOFF_FIRST_SECONDS = 1.0
BACKOFF_MAX_SECONDS = 30.0
STABLE_AFTER_SECONDS = 60.0  # a child that ran this long starts its backoff afresh
STOP_TIMEOUT_SECONDS = 20


def process_group_members(pgid: int) -> list[int]:
    members = []
    for pid in psutil.pids():
        try:
            if os.getpgid(pid) == pgid:
                members.append(pid)
        except (ProcessLookupError, PermissionError):
            continue
    return members


def kill_process_group(pgid: int) -> int:
    """SIGKILL every process left in group `pgid`; returns how many there were."""
    members = process_group_members(pgid)
    if members:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return len(members)


def backoff_seconds(quick_failures: int) -> float:
    """1, 2, 4, 8, 16, 30, 30… seconds for the 1st, 2nd… death in a row that came soon after a start."""
    return min(BACKOFF_MAX_SECONDS, BACKOFF_FIRST_SECONDS * 2 ** max(quick_failures - 1, 0))


class Child:
    """One supervised command. `on_death(pid)` runs after a death, before the restart.

    `output`: the file its stdout and stderr are appended to (None: this process's own).
    """

    def __init__(self, name: str, command: list[str], *, env: dict, log: Callable[[str], None],
                 on_death: Callable[[int], None] | None = None, output: Path | None = None):
        self.name, self.command, self.env, self.log, self.on_death = name, command, env, log, on_death
        self.output = output
        self.proc: subprocess.Popen | None = None
        self.started_at = 0.0
        self.restart_at = 0.0
        self.restarts = 0
        self.quick_failures = 0

    def start(self) -> None:
        if self.output is None:
            self.proc = subprocess.Popen(self.command, env=self.env, process_group=0, stdin=subprocess.DEVNULL)
        else:
            with open(self.output, "ab") as out:  # the child keeps its own descriptor
                out.write(f"=== {self.name} starting at {time.strftime('%Y-%m-%d %H:%M:%S')} ===\n".encode())
                out.flush()
                self.proc = subprocess.Popen(self.command, env=self.env, process_group=0,
                                             stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.started_at = time.monotonic()

    def check(self) -> None:
        """Notice a death (reap its group, schedule a restart) or restart when the backoff is over."""
        now = time.monotonic()
        if self.proc is not None and self.proc.poll() is not None:
            pid, code = self.proc.pid, self.proc.returncode
            left = kill_process_group(pid)
            self.proc = None
            if self.on_death:
                self.on_death(pid)
            self.quick_failures = self.quick_failures + 1 if now - self.started_at < STABLE_AFTER_SECONDS else 1
            delay = backoff_seconds(self.quick_failures)
            self.restarts += 1
            self.restart_at = now + delay
            self.log(f"{self.name} (pid {pid}) exited with code {code}; killed {left} leftover process(es); "
                     f"restarting in {delay:g}s (restart {self.restarts})")
        if self.proc is None and now >= self.restart_at:
            self.start()
            self.log(f"{self.name} restarted (pid {self.proc.pid})")

    def stop(self) -> None:
        """SIGTERM, wait, SIGKILL the group if it hangs; then reap anything it left."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                self.log(f"{self.name} did not stop in {STOP_TIMEOUT_SECONDS}s; killing it")
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        kill_process_group(self.proc.pid)
