"""Tool-call parsers by format name (`agent.tool_parser` in the config): the `PARSERS` registry."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from agentrl.registry import Registry
from agentrl.tools.parsers.base import ToolCallParser

P = TypeVar("P", bound=type[ToolCallParser])


def _is_parser_class(obj: Any) -> bool:
    return isinstance(obj, type) and issubclass(obj, ToolCallParser)


PARSERS: Registry[type[ToolCallParser]] = Registry(
    "tool-call parser",
    {
        "hermes": "agentrl.tools.parsers.hermes:HermesParser",
        "llama3_json": "agentrl.tools.parsers.llama3_json:Llama3JsonParser",
    },
    accepts=_is_parser_class,
    expected="a ToolCallParser subclass",
    example="my_pkg.parsers:MyParser",
)


def register_parser(name: str) -> Callable[[P], P]:
    """Class decorator registering a `ToolCallParser` subclass under `name` (refuses a name already taken)."""

    def decorate(cls: P) -> P:
        PARSERS.add(name, cls)
        cls.name = cls.name or name
        return cls

    return decorate


def get_parser(name: str | ToolCallParser) -> ToolCallParser:
    """A parser instance for the format `name` (a registered name or a dotted path 'pkg.mod:Cls').

    Raises:
        UserError: the name is unknown, listing the known formats.
    """
    if isinstance(name, ToolCallParser):
        return name
    return PARSERS.get(name)()
