"""A deployment filter for tests of the MCP server's concurrency (KNOWHUB_FILTERS in its subprocess): the export
takes SLOW_SECONDS longer, as a long import or export would, and once it has begun, writes the file named by
SLOW_EXPORT_STARTED (so a test knows the export is under way, not guessing by a sleep)."""
import os
import time
from pathlib import Path

from agents.chain import Continue, Filter

SLOW_SECONDS = 6.0


def _slow_export(ctx):
    if ctx["operation"] == "knowledge_export":
        if os.environ.get("SLOW_EXPORT_STARTED"):
            Path(os.environ["SLOW_EXPORT_STARTED"]).write_text("started")
        time.sleep(SLOW_SECONDS)
    return Continue(ctx)


SLOW_EXPORT = Filter("slow_export", "pre_invocation", _slow_export)
