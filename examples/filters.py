"""Two filter-chain filters to copy: an audit hook and a rate limit.

Enable with KNOWHUB_FILTERS=examples.filters.AUDIT,examples.filters.RATE_LIMIT
"""
import logging
import time
from collections import defaultdict, deque

from agents.chain import Continue, Error, Filter

audit_log = logging.getLogger("knowhub.audit")


def _audit(ctx):
    caller = ctx["context"]["caller"]
    audit_log.info("%s by %s with %s", ctx["operation"], caller.principal, sorted(ctx["args"]))
    return Continue(ctx)


AUDIT = Filter("audit", "post_invocation", _audit)

RATE_LIMIT_CALLS = 100
RATE_LIMIT_WINDOW_SECONDS = 60
_recent: dict[str, deque] = defaultdict(deque)


def _rate_limit(ctx):
    # Per process; put the counters in Redis for a limit shared by every worker.
    now = time.monotonic()
    calls = _recent[ctx["context"]["caller"].principal]
    while calls and now - calls[0] > RATE_LIMIT_WINDOW_SECONDS:
        calls.popleft()
    if len(calls) >= RATE_LIMIT_CALLS:
        wait = RATE_LIMIT_WINDOW_SECONDS - (now - calls[0])  # until the oldest call leaves the window
        return Error(f"rate limit: {RATE_LIMIT_CALLS} calls per {RATE_LIMIT_WINDOW_SECONDS}s", status=429,
                     code="rate_limited", retry_after=max(1, round(wait)))
    calls.append(now)
    return Continue(ctx)


RATE_LIMIT = Filter("rate_limit", "pre_invocation", _rate_limit, priority=-10)
