"""A token's static filters: agents store them; the knowledge app, a layer above, knows what they mean.

The knowledge app installs its filter parser here at start-up (`KnowledgeConfig.ready`), so tokens can be
checked when they are made (the admin, `create_agent_token`, `agent_token_create`) without agents
importing knowledge. The parser raises a `core.errors.DomainError` naming what is wrong.
"""
from collections.abc import Callable
from typing import Any

_parser: Callable[[Any], Any] | None = None


def install_parser(parse: Callable[[Any], Any]) -> None:
    global _parser
    _parser = parse


def check_static_filters(value: Any) -> None:
    """Raises DomainError when `value` is not a filter expression (None and {} are none)."""
    if value:
        if _parser is None:
            raise RuntimeError("no filter parser is installed: the knowledge app is not loaded")
        _parser(value)
