"""Registry of tool-call parsers by format name (`agent.tool_parser` in the config)."""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable
from typing import TypeVar

from agentrl.errors import UserError
from agentrl.tools.parsers.base import ToolCallParser

P = TypeVar("P", bound=type[ToolCallParser])

_PARSERS: dict[str, type[ToolCallParser]] = {}


def register_parser(name: str) -> Callable[[P], P]:
    """Register a `ToolCallParser` subclass under `name`, as a class decorator."""

    def decorator(cls: P) -> P:
        if not (isinstance(cls, type) and issubclass(cls, ToolCallParser)):
            raise TypeError(f"register_parser('{name}') needs a ToolCallParser subclass, got {cls!r}")
        cls.name = cls.name or name
        _PARSERS[name] = cls
        return cls

    return decorator


def registered_parsers() -> list[str]:
    """The registered parser names, sorted."""
    return sorted(_PARSERS)


def get_parser(name: str | ToolCallParser) -> ToolCallParser:
    """A parser instance for the format `name` (a registered name or a dotted path 'pkg.mod:Cls').

    Raises:
        UserError: the name is unknown, listing the known formats.
    """
    if isinstance(name, ToolCallParser):
        return name
    if name in _PARSERS:
        return _PARSERS[name]()
    if ":" in name or "." in name:
        return _import(name)
    close = difflib.get_close_matches(name, _PARSERS, n=1)
    hint = f" Did you mean '{close[0]}'?" if close else ""
    known = ", ".join(registered_parsers())
    raise UserError(f"unknown tool-call parser '{name}'.{hint} Known parsers: {known}.")


def _import(path: str) -> ToolCallParser:
    module_name, _, attr = path.partition(":") if ":" in path else path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise UserError(f"cannot import tool-call parser '{path}': {exc}") from exc
    if not (isinstance(cls, type) and issubclass(cls, ToolCallParser)):
        raise UserError(f"'{path}' is {cls!r}, not a ToolCallParser subclass")
    return cls()
