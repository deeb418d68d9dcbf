"""`edit_line`: replace a piece of text on one numbered line of a file in the sandbox.

Made for small models fixing one-token bugs that a traceback points at: the model names the file and the line
(both printed by the failing test) and the text to change on it, instead of rewriting the whole line. The text
operation is the plain function `edit_line_text`; reading and writing the file are `LineEditTool`'s (`line_edit.py`).
"""

from __future__ import annotations

from typing import Any

from agentrl.tools.builtin.editor import EditorError
from agentrl.tools.builtin.line_edit import PATH_AND_LINE, LineEditTool


def edit_line_text(text: str, line: int, old: str, new: str) -> str:
    """`text` with the one occurrence of `old` on its line `line` (1-based) replaced by `new`.

    Raises:
        EditorError: `line` is outside the file, `old` is empty or not exactly once on the line, or either
            text spans several lines.
    """
    if "\n" in old or "\n" in new:
        raise EditorError("old and new must be text within one line; edit_line changes a single line")
    lines = text.split("\n")
    count = len(lines) - (1 if text.endswith("\n") else 0)
    if isinstance(line, bool) or not isinstance(line, int) or not 1 <= line <= count:
        raise EditorError(f"line {line!r} is outside the file: it has {count} lines (1-based)")
    current = lines[line - 1]
    found = current.count(old) if old else 0
    if found != 1:
        what = "is empty" if not old else ("is not on" if found == 0 else f"occurs {found} times on")
        raise EditorError(f"old text {old!r} {what} line {line}: {current.strip()!r}. Give text that occurs once.")
    lines[line - 1] = current.replace(old, new, 1)
    return "\n".join(lines)


class EditLineTool(LineEditTool):
    """Replace the text `old` by `new` on one line of a file in the sandbox."""

    name = "edit_line"
    description = (
        "Replace the text `old` by `new` on line `line` (1-based) of the file `path`. `old` must occur exactly once "
        "on that line. Paths are relative to your working folder or absolute; `pkg.py` also finds `pkg/__init__.py`."
    )
    parameters = {
        "type": "object",
        "properties": {
            **PATH_AND_LINE,
            "old": {"type": "string", "description": "the text to replace, as it is on the line"},
            "new": {"type": "string", "description": "the text to put in its place"},
        },
        "required": ["path", "line", "old", "new"],
    }

    def edit(self, text: str, arguments: dict[str, Any]) -> str:
        return edit_line_text(text, arguments["line"], str(arguments["old"]), str(arguments["new"]))
