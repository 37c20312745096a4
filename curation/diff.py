"""Line diffs between any two states of an item: its versions and its current text."""
import difflib

from knowledge.models import Knowledge

CURRENT = "current"


def state_names(item: Knowledge) -> list[str]:
    """'current', then each version number (as a string), newest first: the states a diff may compare."""
    return [CURRENT, *map(str, item.versions.order_by("-number").values_list("number", flat=True))]


def state(item: Knowledge, name: str) -> dict:
    """{task, content, tags} of one state: only the versions compared are read, however long the history."""
    if name == CURRENT:
        return {"task": item.task, "content": item.content, "tags": item.tags}
    return item.versions.values("task", "content", "tags").get(number=int(name))


def _lines(state: dict) -> list[str]:
    tags = [f"{k}={v}" for k, v in sorted(state["tags"].items())]
    return ["# task", *state["task"].splitlines(), "# content", *state["content"].splitlines(), "# tags", *tags]


def diff_rows(old: dict, new: dict) -> list[tuple[str, str]]:
    """(kind, line) with kind 'same', 'removed' or 'added', old -> new."""
    kinds = {" ": "same", "-": "removed", "+": "added"}
    return [(kinds[line[0]], line[2:]) for line in difflib.ndiff(_lines(old), _lines(new)) if line[0] in kinds]
