"""What the one-line edit tools (`replace_line`, `edit_line`) share: their options, reading the file (a module named
as `pkg.py` where only the package `pkg/__init__.py` exists is that package's file, as Python imports it), writing
it back and the answer; each tool supplies only its text operation (`LineEditTool.edit`)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from agentrl.tools.base import Tool, ToolContext, ToolResult
from agentrl.tools.builtin.common import ArgumentOptions, require_sandbox
from agentrl.tools.builtin.editor import EditorError, read_sandbox_text, snippet

PATH_AND_LINE = {
    "path": {"type": "string", "description": "the file"},
    "line": {"type": "integer", "description": "the line number, 1-based"},
}


class LineEditOptions(ArgumentOptions):
    """`config:` of the one-line edit tools."""

    ends_episode: bool = Field(False, description="the edit is the agent's submission: the episode ends after it")


async def read_module(sandbox: Any, full: str) -> tuple[str, str]:
    """The file `full` and its text; a missing `pkg.py` is read as `pkg/__init__.py` where that exists.

    Raises:
        EditorError: neither exists.
    """
    try:
        return full, await read_sandbox_text(sandbox, full)
    except EditorError:
        if not full.endswith(".py"):
            raise
        package = full.removesuffix(".py") + "/__init__.py"
        try:
            return package, await read_sandbox_text(sandbox, package)
        except EditorError:
            pass
        raise


class LineEditTool(Tool):
    """A tool that changes one numbered line of a file in the sandbox; subclasses define `edit`."""

    config_model = LineEditOptions
    cfg: LineEditOptions

    def edit(self, text: str, arguments: dict[str, Any]) -> str:
        """The file's new text (raises EditorError on arguments that do not fit the file)."""
        raise NotImplementedError

    async def execute(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        sandbox = require_sandbox(ctx, self.name)
        full, text = await read_module(sandbox, sandbox.resolve(arguments["path"]))
        text = self.edit(text, arguments)
        await sandbox.write_file(full, text)
        line = arguments["line"]
        content = f"Line {line} of {full} is now:\n{snippet(text, line, 1)}"
        return ToolResult(call_id="", name="", content=content, metadata={"submitted": self.cfg.ends_episode})
