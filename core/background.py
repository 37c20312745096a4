"""A request's side work on a few threads of the process: started now, its result taken when it is needed.

`Background(threads, name).soon(function, *args)` hands the call to one of the threads and returns a function that
gives its result (waiting for it, or raising what it raised). When every thread is busy the call waits in the queue,
and whoever asks for the result first while it still waits there runs it in its own thread instead: under load
nothing is gained, and nothing is lost to a queue behind other requests' work. The call runs in a copy of the
caller's context (contextvars: the request id its logs carry). A forked child starts its own threads when first asked.
"""
import contextvars
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any


class Background:
    def __init__(self, threads: int, name: str, initializer: Callable[[], None] | None = None):
        self.threads = threads
        self.name = name
        self.initializer = initializer
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._taken = 0  # calls handed to the threads by if_idle and not yet done
        os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        """In a forked child: the parent's threads did not come along, and its lock may have been held when it forked."""
        self._executor, self._lock, self._taken = None, threading.Lock(), 0

    def executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(self.threads, thread_name_prefix=self.name,
                                                    initializer=self.initializer)
            return self._executor

    def soon(self, function: Callable[..., Any], *args) -> Callable[[], Any]:
        """Start `function(*args)` on one of the threads; the function returned gives its result (or computes it in
        the caller's thread if no thread has taken it up yet, or if the interpreter is shutting down); its `cancel()`
        drops the call if no thread has taken it up."""
        try:
            future = self.executor().submit(contextvars.copy_context().run, function, *args)
        except RuntimeError:  # "cannot schedule new futures after interpreter shutdown"
            return inline(function, *args)

        def result() -> Any:
            if future.cancel():  # still queued: every thread is busy
                return function(*args)
            return future.result()

        result.cancel = future.cancel
        return result


    def if_idle(self, function: Callable[..., Any], *args) -> Callable[[], Any] | None:
        """`soon`, when one of the threads is free for the call (counting the calls this method handed them that have
        neither ended nor been cancelled); None at once when none is, for the caller to run it itself."""
        with self._lock:
            if self._taken >= self.threads:
                return None
            self._taken += 1
        released = threading.Event()

        def release() -> None:
            with self._lock:
                if not released.is_set():
                    released.set()
                    self._taken -= 1

        def counted(*args) -> Any:
            try:
                return function(*args)
            finally:
                release()

        started = self.soon(counted, *args)
        cancel = started.cancel

        def cancelled() -> bool:
            if cancel():
                release()
                return True
            return False

        started.cancel = cancelled
        return started


def inline(function: Callable[..., Any], *args) -> Callable[[], Any]:
    """`soon`'s result for a call that runs in the caller's thread, when asked for."""
    def result() -> Any:
        return function(*args)

    result.cancel = lambda: True
    return result
