"""A deployment filter for tests of the MCP server's concurrency (KNOWHUB_FILTERS in its subprocess): the export
takes SLOW_SECONDS longer, as a long import or export would."""
import time

from agents.chain import Continue, Filter

SLOW_SECONDS = 4.0


def _slow_export(ctx):
    if ctx["operation"] == "knowledge_export":
        time.sleep(SLOW_SECONDS)
    return Continue(ctx)


SLOW_EXPORT = Filter("slow_export", "pre_invocation", _slow_export)
