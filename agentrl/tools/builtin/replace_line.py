"""`replace_line`: replace one numbered line of a file in the sandbox, keeping its indentation.

Made for small models fixing one-line bugs: the model names the file, the line number and the line's new content;
the indentation stays the line's own, so a reply cannot break the file's block structure by a space. The text
operation is the plain function `replace_line_text`; reading and writing the file are `LineEditTool`'s (`line_edit.py`).
"""

from __future__ import annotations

from typing import Any

from agentrl.tools.builtin.editor import EditorError
from agentrl.tools.builtin.line_edit import PATH_AND_LINE, LineEditTool


def replace_line_text(text: str, line: int, new: str) -> str:
    """`text` with its line `line` (1-based) replaced by `new`, indented as the old line was.

    Raises:
        EditorError: `line` is outside the file, or `new` spans several lines.
    """
    if "\n" in new.strip("\n"):
        raise EditorError("text must be one line; replace_line changes a single line")
    lines = text.split("\n")
    count = len(lines) - (1 if text.endswith("\n") else 0)
    if isinstance(line, bool) or not isinstance(line, int) or not 1 <= line <= count:
        raise EditorError(f"line {line!r} is outside the file: it has {count} lines (1-based)")
    old = lines[line - 1]
    lines[line - 1] = old[: len(old) - len(old.lstrip())] + new.strip()
    return "\n".join(lines)


class ReplaceLineTool(LineEditTool):
    """Replace one line of a file in the sandbox (its indentation is kept)."""

    name = "replace_line"
    description = (
        "Replace line `line` (1-based) of the file `path` with `text`, the line's new content. The line keeps its "
        "indentation. Paths are relative to your working folder or absolute."
    )
    parameters = {
        "type": "object",
        "properties": {
            **PATH_AND_LINE,
            "text": {"type": "string", "description": "the new content of the line"},
        },
        "required": ["path", "line", "text"],
    }

    def edit(self, text: str, arguments: dict[str, Any]) -> str:
        return replace_line_text(text, arguments["line"], str(arguments["text"]))
