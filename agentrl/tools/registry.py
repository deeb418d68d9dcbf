"""Tool registry: short names (or dotted paths) to tool classes, and building tools from YAML specs.

```yaml
tools:
  - class: calculator              # a registered name
  - class: my_pkg.tools:Search     # or any dotted path ("pkg.mod:Cls" or "pkg.mod.Cls")
    config: {max_results: 5}
```
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from pydantic import BaseModel

from agentrl.errors import UserError
from agentrl.registry import Registry
from agentrl.tools.base import Tool

ToolEntry = type[Tool] | Tool
T = TypeVar("T", bound=ToolEntry)


def _is_tool_entry(entry: Any) -> bool:
    return isinstance(entry, Tool) or (isinstance(entry, type) and issubclass(entry, Tool))


TOOLS: Registry[ToolEntry] = Registry(
    "tool",
    {
        "bash": "agentrl.tools.builtin.shell:BashTool",
        "python": "agentrl.tools.builtin.shell:PythonTool",
        "editor": "agentrl.tools.builtin.editor:EditorTool",
        "replace_line": "agentrl.tools.builtin.replace_line:ReplaceLineTool",
        "edit_line": "agentrl.tools.builtin.edit_line:EditLineTool",
        "view_lines": "agentrl.tools.builtin.view_lines:ViewLinesTool",
        "search_code": "agentrl.tools.builtin.search_code:SearchCodeTool",
        "run_tests": "agentrl.tools.builtin.run_tests:RunTestsTool",
        "submit": "agentrl.tools.builtin.submit:SubmitTool",
        "calculator": "agentrl.tools.builtin.calculator:calculator",
    },
    accepts=_is_tool_entry,
    expected="a Tool subclass or a @tool function",
    example="my_pkg.tools:MyTool",
)
"""Tools by `tools[].class`: a `Tool` subclass (built with the spec's `config`) or a `@tool` function."""


def register_tool(name: str) -> Callable[[T], T]:
    """Register a `Tool` subclass or a `@tool` function under `name`, as a decorator (refuses a name taken).

    Example:
        ```python
        @register_tool("calculator")
        @tool
        def calculator(expression: str) -> str: ...
        ```
    """
    return TOOLS.register(name)


def get_tool_class(name: str) -> ToolEntry:
    """The tool class (or function tool) registered as `name`, or found at the dotted path `name`.

    Raises:
        UserError: `name` is neither registered nor importable, with the known names.
    """
    return TOOLS.get(name)


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
        except UserError as exc:
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
    except UserError:
        raise
    except Exception as exc:
        raise UserError(f"tool '{cls}' failed to build with config {config}: {exc}") from exc


def tool_problems(specs: Iterable[Any]) -> list[str]:
    """Each `tools[i].class` that names no registered or importable tool, with the known names."""
    return [f"tools[{i}].class: {p}" for i, spec in enumerate(specs) if (p := TOOLS.problem(spec.class_))]
