"""What the database cannot store and the stack cannot walk: checked before anything runs.

PostgreSQL refuses NUL characters (and lone UTF-16 surrogates cannot be encoded as
UTF-8) in text and JSON, and a JSON document nested a thousand levels deep exhausts
Python's recursion limit in whatever walks it next. `json_problem` finds the first
such place in a parsed value, naming it by its dotted path (`feedback_list.1.case.a`),
without recursion, so the check itself is safe on any input.
"""
import re
from typing import Any

from django.utils.translation import gettext as _

MAX_DEPTH = 32  # levels of nested objects and arrays in a request body or JSON parameter
UNSAFE_CHARACTERS = re.compile("[\x00\ud800-\udfff]")


def text_problem(text: str) -> str | None:
    match = UNSAFE_CHARACTERS.search(text)
    if match is None:
        return None
    return _("contains a NUL character") if match.group() == "\x00" else _("contains an unpaired UTF-16 surrogate")


def json_problem(value: Any, *, path: str = "", max_depth: int = MAX_DEPTH,
                 characters: bool = True) -> tuple[str, str] | None:
    """(path, problem) for the first NUL, lone surrogate or too-deep nesting in `value`; None if it is safe.

    `path` names where `value` sits; the returned path is `path` extended by keys and indexes. With
    `characters=False` only the nesting is checked (a reply `storable` will clean, but must first be walkable).
    """
    stack = [(value, path, 0)]
    while stack:
        node, where, depth = stack.pop()
        if isinstance(node, str):
            if not characters:
                continue
            problem = text_problem(node)
            if problem:
                return where or "non_field_errors", problem
            continue
        if not isinstance(node, (dict, list, tuple)):
            continue
        if depth >= max_depth:
            return where or "non_field_errors", _("nests deeper than %(depth)s levels") % {"depth": max_depth}
        items = node.items() if isinstance(node, dict) else enumerate(node)
        children = []
        for key, child in items:
            shown = UNSAFE_CHARACTERS.sub("\ufffd", key) if isinstance(key, str) else str(key)
            name = f"{where}.{shown}" if where else shown
            if characters and isinstance(key, str) and text_problem(key):
                return name, _("a key %(problem)s") % {"problem": text_problem(key)}
            children.append((child, name, depth + 1))
        stack.extend(reversed(children))  # report the first problem in document order
    return None


def storable(value: Any) -> Any:
    """`value` with every NUL and lone surrogate in its strings (keys included) replaced by U+FFFD: what an outside
    service's reply (an LLM's) may hold and PostgreSQL could not store. For values of bounded depth (a reply already
    validated against a shallow schema)."""
    if isinstance(value, str):
        return UNSAFE_CHARACTERS.sub("\ufffd", value)
    if isinstance(value, dict):
        return {storable(key): storable(child) for key, child in value.items()}
    if isinstance(value, list):
        return [storable(child) for child in value]
    return value
