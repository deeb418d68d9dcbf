"""Tool registry: short names (or dotted paths) to tool classes, and building tools from YAML specs.

```yaml
tools:
  - class: calculator              # a registered name
  - class: my_pkg.tools:Search     # or any dotted path ("pkg.mod:Cls" or "pkg.mod.Cls")
    config: {max_results: 5}
```
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from pydantic import BaseModel

from agentrl.errors import AgentRLError, UserError
from agentrl.tools.base import Tool

ToolEntry = type[Tool] | Tool
T = TypeVar("T", bound=ToolEntry)

_REGISTRY: dict[str, ToolEntry | str] = {}
"""Name to tool class, function tool, or the dotted path of either (imported on first use)."""


def register_tool(name: str) -> Callable[[T], T]:
    """Register a `Tool` subclass or a `@tool` function under `name`, as a decorator.

    Example:
        ```python
        @register_tool("calculator")
        @tool
        def calculator(expression: str) -> str: ...
        ```
    """

    def decorator(entry: T) -> T:
        if not _is_tool_entry(entry):
            raise TypeError(f"register_tool('{name}') needs a Tool subclass or a @tool function, got {entry!r}")
        _REGISTRY[name] = entry
        return entry

    return decorator


def register_tool_path(name: str, dotted_path: str) -> None:
    """Register a tool by dotted path, imported only when the tool is first built (keeps imports light)."""
    _REGISTRY[name] = dotted_path


def registered_tools() -> list[str]:
    """The registered tool names, sorted."""
    return sorted(_REGISTRY)


def get_tool_class(name: str) -> ToolEntry:
    """The tool class (or function tool) registered as `name`, or found at the dotted path `name`.

    Raises:
        UserError: `name` is neither registered nor importable, with the known names.
    """
    entry = _REGISTRY.get(name)
    if isinstance(entry, str):
        entry = _REGISTRY[name] = _import(entry, name)
    if entry is not None:
        return entry
    if "." in name or ":" in name:
        return _import(name, name)
    raise UserError(_unknown_message(name))


def _unknown_message(name: str) -> str:
    known = registered_tools()
    close = difflib.get_close_matches(name, known, n=1)
    hint = f" Did you mean '{close[0]}'?" if close else ""
    listed = ", ".join(known) or "none registered"
    return (
        f"unknown tool '{name}'.{hint} Known tools: {listed}. "
        "Or give the dotted path of a Tool class, e.g. 'my_pkg.tools:MyTool'."
    )


def _import(path: str, name: str) -> ToolEntry:
    module_name, _, attr = path.partition(":") if ":" in path else path.rpartition(".")
    if not module_name or not attr:
        raise UserError(f"tool '{name}': '{path}' is not a dotted path like 'pkg.module:ClassName'")
    try:
        entry = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise UserError(f"tool '{name}': cannot import '{path}': {exc}") from exc
    if not _is_tool_entry(entry):
        raise UserError(f"tool '{name}': '{path}' is {entry!r}, not a Tool subclass or a @tool function")
    return entry


def _is_tool_entry(entry: Any) -> bool:
    return isinstance(entry, Tool) or (isinstance(entry, type) and issubclass(entry, Tool))


def build_tools(specs: Iterable[dict[str, Any] | BaseModel]) -> list[Tool]:
    """Build the tools of a config's `tools:` list.

    Args:
        specs: entries like `{"class": "calculator", "config": {...}}`, or `agentrl.config.ToolSpec`s.

    Returns:
        One tool per spec: classes are instantiated with their config; function tools are used as they are.

    Raises:
        UserError: listing every bad spec at once (unknown class, bad config, duplicate tool names).
    """
    tools: list[Tool] = []
    errors: list[str] = []
    for i, spec in enumerate(specs):
        try:
            tools.append(_build_one(*_read_spec(spec)))
        except AgentRLError as exc:
            errors.append(f"tools[{i}]: {exc}")
    names = [t.name for t in tools]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    errors += [f"two tools are named '{n}'; tool names must be unique" for n in duplicates]
    if errors:
        raise UserError("invalid tools config:\n  " + "\n  ".join(errors))
    return tools


def _read_spec(spec: dict[str, Any] | BaseModel) -> tuple[str, dict[str, Any]]:
    data = spec.model_dump(by_alias=True) if isinstance(spec, BaseModel) else dict(spec)
    cls = data.pop("class", None) or data.pop("class_", None)
    config = data.pop("config", None) or {}
    if data:
        raise UserError(f"unexpected keys {sorted(data)}; a tool spec has 'class' and 'config'")
    if not isinstance(cls, str) or not cls:
        raise UserError("missing 'class': the registered name or dotted path of the tool")
    if not isinstance(config, dict):
        raise UserError(f"tool '{cls}': 'config' must be a mapping, got {config!r}")
    return cls, config


def _build_one(cls: str, config: dict[str, Any]) -> Tool:
    entry = get_tool_class(cls)
    if isinstance(entry, Tool):
        if config:
            raise UserError(f"tool '{cls}' is a @tool function and takes no config; got {sorted(config)}")
        return entry
    try:
        return entry(config)
    except AgentRLError:
        raise
    except Exception as exc:
        raise UserError(f"tool '{cls}' failed to build with config {config}: {exc}") from exc
