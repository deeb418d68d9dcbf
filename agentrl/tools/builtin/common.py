"""What the sandboxed built-in tools share: finding the sandbox, and rendering a command's result."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentrl.errors import UserError
from agentrl.tools.base import ToolContext, ToolResult


class ArgumentOptions(BaseModel):
    """`config:` every small-model tool takes: what becomes of arguments its schema does not list."""

    model_config = ConfigDict(extra="forbid")
    extra_arguments: Literal["refuse", "ignore"] = Field(
        "refuse",
        description="an argument the schema does not list: an error the model reads (refuse), or dropped before the "
        "call (ignore: a small model's stray keys do not cost it the call)",
    )


class NoSandboxError(UserError):
    """A sandboxed tool was called in a trajectory that has no sandbox."""


def require_sandbox(ctx: ToolContext, tool: str) -> Any:
    """The trajectory's sandbox.

    Raises:
        NoSandboxError: none is configured, saying how to configure one.
    """
    if ctx.sandbox is None:
        raise NoSandboxError(
            f"tool '{tool}' needs a sandbox, but none is configured: set sandbox.backend to 'docker' "
            "(or 'local' for development) in the config"
        )
    return ctx.sandbox


def render_exec(result: Any, timeout: float) -> ToolResult:
    """An `ExecResult` as the text the model reads: output, then the exit code or the timeout."""
    parts = []
    if result.stdout:
        parts.append(result.stdout.rstrip("\n"))
    if result.stderr:
        parts.append(f"[stderr]\n{result.stderr.rstrip(chr(10))}")
    if result.timed_out:
        parts.append(f"[timed out after {timeout:g}s; the command and its child processes were killed]")
    elif result.exit_code != 0:
        parts.append(f"[exit code {result.exit_code}]")
    text = "\n".join(parts) or "[no output]"
    is_error = result.timed_out or result.exit_code != 0
    return ToolResult(call_id="", name="", content=text, is_error=is_error, timed_out=result.timed_out,
                      metadata={"exit_code": result.exit_code})  # fmt: skip
