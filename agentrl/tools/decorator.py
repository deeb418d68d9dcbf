"""`@tool`: turn a plain (sync or async) Python function into a `Tool`."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, get_type_hints, overload

from agentrl.tools.base import Tool, ToolContext, ToolResult
from agentrl.tools.schema import function_schema
from agentrl.tools.threads import run_in_daemon_thread


class FunctionTool(Tool):
    """A tool backed by one function; its schema comes from the function's type hints and docstring.

    A parameter annotated `ToolContext` is not part of the schema: it receives the trajectory's context
    (sandbox lease, state). Sync functions run in a daemon thread, so a blocking call can time out too.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        timeout_s: float | None = None,
    ) -> None:
        self.fn = fn
        self.name = name or fn.__name__
        self._ctx_param = _context_parameter(fn)
        skip = {self._ctx_param} if self._ctx_param else set()
        doc_description, self.parameters = function_schema(fn, skip=skip)
        self.description = description if description is not None else doc_description
        self.timeout_s = timeout_s
        self._is_async = inspect.iscoroutinefunction(fn)
        super().__init__()
        functools.update_wrapper(self, fn)

    async def execute(self, arguments: dict[str, Any], ctx: ToolContext) -> str | ToolResult:
        """Call the function with `arguments` (plus the context, if it asks for one)."""
        kwargs = dict(arguments)
        if self._ctx_param:
            kwargs[self._ctx_param] = ctx
        if self._is_async:
            return await self.fn(**kwargs)
        return await run_in_daemon_thread(self.fn, **kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the wrapped function directly, as if it were not decorated."""
        return self.fn(*args, **kwargs)


def _context_parameter(fn: Callable[..., Any]) -> str | None:
    """The name of the parameter annotated `ToolContext`, if any."""
    hints = get_type_hints(fn)
    return next((name for name, hint in hints.items() if hint is ToolContext and name != "return"), None)


@overload
def tool(fn: Callable[..., Any], /) -> FunctionTool: ...


@overload
def tool(
    fn: None = None, /, *, name: str | None = None, description: str | None = None, timeout_s: float | None = None
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout_s: float | None = None,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Make a tool of a sync or async function, usable as `@tool` or `@tool(name=..., timeout_s=...)`.

    The JSON schema comes from the type hints (str, int, float, bool, list[...], dict, Literal[...],
    Optional / `X | None`, Any); parameters with defaults are optional. The docstring's text before its
    sections is the tool's description and its `Args:` entries describe the parameters. The function
    returns the text the model reads (other values are JSON-encoded) and raises to report a failure.

    Example:
        ```python
        @tool
        def add(a: int, b: int = 1) -> int:
            \"\"\"Add two integers.

            Args:
                a: the first addend.
                b: the second addend.
            \"\"\"
            return a + b
        ```

    Args:
        fn: the function (when used as a bare `@tool`).
        name: the tool's name; defaults to the function's name.
        description: overrides the docstring's description.
        timeout_s: per-call timeout of this tool; None uses the `ToolSet` default.

    Raises:
        TypeError: a parameter lacks a type hint or has one with no JSON-schema equivalent.
    """

    def wrap(f: Callable[..., Any]) -> FunctionTool:
        return FunctionTool(f, name=name, description=description, timeout_s=timeout_s)

    return wrap(fn) if fn is not None else wrap
