"""What the sandboxed built-in tools share: finding the sandbox, rendering a command's result, and the options of
the one-line edit tools."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentrl.errors import UserError
from agentrl.tools.base import ToolContext, ToolResult


class NoSandboxError(UserError):
    """A sandboxed tool was called in a trajectory that has no sandbox."""


class LineEditOptions(BaseModel):
    """`config:` of the one-line edit tools (`replace_line`, `edit_line`)."""

    model_config = ConfigDict(extra="forbid")
    ends_episode: bool = Field(False, description="the edit is the agent's submission: the episode ends after it")


def line_edit_result(full: str, text: str, line: int, options: LineEditOptions) -> ToolResult:
    """What a one-line edit tool answers: the edited line as it is now, and whether the edit is the submission."""
    from agentrl.tools.builtin.editor import snippet

    content = f"Line {line} of {full} is now:\n{snippet(text, line, 1)}"
    return ToolResult(call_id="", name="", content=content, metadata={"submitted": options.ends_episode})


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
