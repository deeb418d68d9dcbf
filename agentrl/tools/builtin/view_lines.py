"""`view_lines`: numbered lines of a file in the sandbox, a range at a time (a small model's way to read code)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from agentrl.tools.base import Tool, ToolContext, ToolResult
from agentrl.tools.builtin.common import ArgumentOptions, require_sandbox
from agentrl.tools.builtin.editor import EditorError, view_text
from agentrl.tools.builtin.line_edit import read_module

AROUND = 3  # lines shown before and after a `line`


class ViewLinesOptions(ArgumentOptions):
    """`config:` of `view_lines`."""

    max_lines: int = Field(40, ge=1, description="lines shown at most per call (a longer range is cut there)")


class ViewLinesTool(Tool):
    """Show lines `start` to `end` of a file, numbered."""

    name = "view_lines"
    description = (
        "Show the lines `start` to `end` (1-based, inclusive) of the file `path`, numbered; or, given `line`, the "
        "lines around it. Paths are relative to your working folder or absolute; `pkg.py` also finds "
        "`pkg/__init__.py`."
    )
    parameters = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "the file"},
            "start": {"type": "integer", "description": "the first line, 1-based"},
            "end": {"type": "integer", "description": "the last line"},
            "line": {"type": "integer", "description": "instead of start and end: a line to show with its neighbours"},
        },
        "required": ["path"],
    }
    config_model = ViewLinesOptions
    cfg: ViewLinesOptions

    async def execute(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        sandbox = require_sandbox(ctx, self.name)
        full, text = await read_module(sandbox, sandbox.resolve(arguments["path"]))
        total = len(text.split("\n")) - (1 if text.endswith("\n") else 0)
        first, last = self._range(arguments)
        start = max(first, 1)
        end = min(last, total, start + self.cfg.max_lines - 1)
        shown = view_text(text, [start, max(end, start)])
        return ToolResult(call_id="", name="", content=f"{full}, lines {start}-{max(end, start)} of {total}:\n{shown}")

    def _range(self, arguments: dict[str, Any]) -> tuple[int, int]:
        if "start" in arguments and "end" in arguments:
            return int(arguments["start"]), int(arguments["end"])
        if "line" in arguments:
            line = int(arguments["line"])
            return line - AROUND, line + AROUND
        raise EditorError("give start and end (the lines to show), or line (a line to show with its neighbours)")
