"""Which worker process instance this is, and pool children that die with it.

A hostname is not an identity: `make run` restarts a crashed worker under the
same name within seconds. So a worker instance is named by its hostname, its
main process id and a random boot id drawn when it starts. The prefork pool's
children are forked after that and inherit the name, so a job claimed by a
child records the instance whose heartbeat says whether it is still alive.
"""
import ctypes
import logging
import os
import secrets
import signal
import sys

logger = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>

_instance = ""
_main_pid = 0


def worker_instance_start(*, hostname: str) -> str:
    """Name this worker instance; called once in the worker's main process, before the pool forks."""
    global _instance, _main_pid
    _main_pid = os.getpid()
    _instance = f"{hostname}/{_main_pid}/{secrets.token_hex(4)}"
    return _instance


def worker_instance() -> str:
    """This process's worker instance ("" outside a worker)."""
    return _instance


def running_task_worker(task) -> str:
    """The worker instance a bound Celery task runs in, for a job's claim (its hostname outside a named worker)."""
    return worker_instance() or task.request.hostname or ""


def task_claimant(task) -> dict[str, str]:
    """Who claims a job for a bound Celery task: its worker instance and its message (`job_claim`'s keywords)."""
    return {"worker": running_task_worker(task), "task_id": task.request.id or ""}


def instance_hostname(instance: str) -> str:
    return instance.rsplit("/", 2)[0]


def die_with_parent() -> bool:
    """Have the kernel SIGKILL this child (pool process, embedded beat) when the worker's main process dies.

    Linux only. Without it a child of a SIGKILLed worker runs on: a pool
    child finishes its job, racing the copy that is re-sent; the embedded
    beat keeps sending periodic tasks forever. Celery already sets this for
    pool children (not for the beat) but does not check whether the parent
    died before the call took effect; we do. PDEATHSIG follows the thread
    that forked us; the worker forks from its main thread.
    """
    if not sys.platform.startswith("linux") or not _main_pid:
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        logger.warning("prctl(PR_SET_PDEATHSIG) failed: errno %s", ctypes.get_errno())
        return False
    if os.getppid() != _main_pid:
        os._exit(1)  # the parent died before prctl took effect: nobody will ever kill us
    return True
