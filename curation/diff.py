"""Line diffs between any two states of an item: its versions and its current text."""
import difflib

from knowledge.models import Knowledge

CURRENT = "current"


def states(item: Knowledge) -> dict[str, dict]:
    """'current' and each version number (as a string) -> {task, content, tags}."""
    found = {CURRENT: {"task": item.task, "content": item.content, "tags": item.tags}}
    for v in item.versions.all():
        found[str(v.number)] = {"task": v.task, "content": v.content, "tags": v.tags}
    return found


def _lines(state: dict) -> list[str]:
    tags = [f"{k}={v}" for k, v in sorted(state["tags"].items())]
    return ["# task", *state["task"].splitlines(), "# content", *state["content"].splitlines(), "# tags", *tags]


def diff_rows(old: dict, new: dict) -> list[tuple[str, str]]:
    """(kind, line) with kind 'same', 'removed' or 'added', old -> new."""
    kinds = {" ": "same", "-": "removed", "+": "added"}
    return [(kinds[line[0]], line[2:]) for line in difflib.ndiff(_lines(old), _lines(new)) if line[0] in kinds]
