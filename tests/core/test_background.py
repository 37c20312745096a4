"""core.background: a request's side work on a few threads, run by the caller when no thread is free for it."""
import threading

from core.background import Background


def test_a_call_runs_on_one_of_the_threads_and_gives_its_result():
    background = Background(1, "test-side")
    started = background.soon(lambda x: (threading.current_thread().name, x * 2), 21)
    name, value = started()
    assert value == 42 and name.startswith("test-side")


def test_a_call_still_queued_when_its_result_is_asked_runs_in_the_callers_thread():
    background = Background(1, "test-side")
    release = threading.Event()
    busy = background.soon(release.wait, 30)
    queued = background.soon(lambda: threading.current_thread().name)
    assert queued() == threading.current_thread().name  # not left waiting behind the busy thread
    release.set()
    assert busy() is True


def test_if_idle_answers_none_at_once_while_every_thread_is_taken_and_hands_out_threads_again_when_they_end():
    background = Background(2, "test-side")
    release = threading.Event()
    taken = [background.if_idle(release.wait, 30) for _ in range(2)]
    assert all(taken)
    assert background.if_idle(lambda: "more") is None
    release.set()
    assert [started() for started in taken] == [True, True]
    again = background.if_idle(lambda: "free again")
    assert again is not None and again() == "free again"


def test_a_cancelled_call_gives_its_thread_back():
    background = Background(1, "test-side")
    occupied = background.soon(threading.Event().wait, 0.2)  # the thread busy with a call if_idle does not count
    dropped = background.if_idle(lambda: "never")
    assert dropped is not None  # queued behind it
    assert dropped.cancel()
    occupied()
    kept = background.if_idle(lambda: "ran")
    assert kept is not None and kept() == "ran"


def test_a_call_runs_in_a_copy_of_the_callers_context():
    import contextvars

    request_id = contextvars.ContextVar("request_id", default=None)
    request_id.set("req-7")
    background = Background(1, "test-side")
    assert background.soon(request_id.get)() == "req-7"
