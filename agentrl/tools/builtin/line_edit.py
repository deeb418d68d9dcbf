"""What the one-line edit tools (`replace_line`, `edit_line`) share: their options and their answer."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from agentrl.tools.base import ToolResult
from agentrl.tools.builtin.editor import snippet


class LineEditOptions(BaseModel):
    """`config:` of the one-line edit tools."""

    model_config = ConfigDict(extra="forbid")
    ends_episode: bool = Field(False, description="the edit is the agent's submission: the episode ends after it")


def line_edit_result(full: str, text: str, line: int, options: LineEditOptions) -> ToolResult:
    """What a one-line edit tool answers: the edited line as it is now, and whether the edit is the submission."""
    content = f"Line {line} of {full} is now:\n{snippet(text, line, 1)}"
    return ToolResult(call_id="", name="", content=content, metadata={"submitted": options.ends_episode})
