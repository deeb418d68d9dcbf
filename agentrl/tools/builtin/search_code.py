"""`search_code`: where a text occurs in the sandbox's files (`grep -rn`), the first matches only."""

from __future__ import annotations

import shlex
from typing import Any

from pydantic import Field

from agentrl.tools.base import Tool, ToolContext, ToolResult
from agentrl.tools.builtin.common import ArgumentOptions, require_sandbox


class SearchOptions(ArgumentOptions):
    """`config:` of `search_code`."""

    max_matches: int = Field(20, ge=1, description="matching lines shown at most")
    include: str = Field("*.py", description="the files searched (a grep --include pattern)")


class SearchCodeTool(Tool):
    """List the lines (`file:line: text`) where a text occurs in the repository's files."""

    name = "search_code"
    description = (
        "Find the lines where the exact text `text` occurs in the files of your working folder (or under `path`). "
        "Answers `file:line: the line`, the first matches only."
    )
    parameters = {
        "type": "object",
        "properties": {
            "text": {"type": "string", "description": "the text to find, as it is written"},
            "path": {"type": "string", "description": "a folder or file to search in (default: the working folder)"},
        },
        "required": ["text"],
    }
    config_model = SearchOptions
    cfg: SearchOptions

    async def execute(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        sandbox = require_sandbox(ctx, self.name)
        text, where = str(arguments["text"]), str(arguments.get("path") or ".")
        if not text.strip():
            return ToolResult(call_id="", name="", content="Error: give a non-empty text to find", is_error=True)
        command = (
            f"grep -rnF --include={shlex.quote(self.cfg.include)} -e {shlex.quote(text)} -- {shlex.quote(where)} "
            f"| head -n {self.cfg.max_matches + 1}"
        )
        result = await sandbox.exec(command, timeout=30)
        lines = [line for line in result.stdout.splitlines() if line]
        if not lines:
            return ToolResult(call_id="", name="", content=f"No line contains {text!r}.")
        more = len(lines) > self.cfg.max_matches
        shown = "\n".join(line.removeprefix("./") for line in lines[: self.cfg.max_matches])
        return ToolResult(call_id="", name="", content=shown + ("\n[more matches not shown]" if more else ""))
