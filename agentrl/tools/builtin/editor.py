"""`editor`: view, create and edit files in the sandbox with exact string replacement.

The text operations are plain functions (`view_text`, `replace_text`, `insert_text`) so they can be tested
without a sandbox; `EditorTool` reads and writes the files through `ctx.sandbox`.
"""

from __future__ import annotations

import shlex
from typing import Any

from agentrl.errors import UserError
from agentrl.tools.base import Tool, ToolContext
from agentrl.tools.builtin.common import require_sandbox

SNIPPET_LINES = 4
"""Lines of context shown around an edit."""


class EditorError(UserError):
    """An edit that cannot be made; the message tells the model what to do instead."""


def number_lines(text: str, first: int = 1) -> str:
    """`text` with a right-aligned line number and a tab before each line."""
    return "\n".join(f"{i:6}\t{line}" for i, line in enumerate(text.split("\n"), start=first))


def view_text(text: str, view_range: list[int] | None = None) -> str:
    """The lines of `text` (all, or `[start, end]`, 1-based and inclusive; end -1 = the last), numbered."""
    lines = text.split("\n")
    if text.endswith("\n"):
        lines = lines[:-1]
    if not view_range:
        return number_lines("\n".join(lines))
    if len(view_range) != 2 or not all(isinstance(n, int) for n in view_range):
        raise EditorError("view_range must be two integers [start, end]")
    start, end = view_range
    end = len(lines) if end == -1 else end
    if not 1 <= start <= max(len(lines), 1) or end < start:
        raise EditorError(f"view_range {view_range} is outside the file's {len(lines)} lines (1-based, end -1 = last)")
    return number_lines("\n".join(lines[start - 1 : end]), first=start)


def replace_text(text: str, old: str, new: str) -> tuple[str, int]:
    """Replace the one occurrence of `old` in `text` with `new`; return the new text and the edit's first line.

    Raises:
        EditorError: `old` is empty, absent, or occurs more than once (with the lines where).
    """
    if not old:
        raise EditorError("old_str is empty; give the exact text to replace")
    count = text.count(old)
    if count == 0:
        raise EditorError("no match: old_str does not occur verbatim in the file (check whitespace and indentation)")
    if count > 1:
        lines, at = [], text.find(old)
        while at != -1:
            lines.append(text.count("\n", 0, at) + 1)
            at = text.find(old, at + 1)
        where = ", ".join(map(str, lines))
        raise EditorError(f"{count} matches of old_str (lines {where}); include more context to make it unique")
    at = text.find(old)
    return text.replace(old, new, 1), text.count("\n", 0, at) + 1


def insert_text(text: str, line: int, new: str) -> str:
    """Insert `new` after line `line` of `text` (0 = at the top).

    Raises:
        EditorError: `line` is outside the file.
    """
    lines = text.split("\n")
    if text.endswith("\n"):
        lines = lines[:-1]
    if not 0 <= line <= len(lines):
        raise EditorError(f"insert_line {line} is outside the file: it has {len(lines)} lines (0 = at the top)")
    lines[line:line] = new.removesuffix("\n").split("\n")
    return "\n".join(lines) + "\n"


async def read_sandbox_text(sandbox: Any, full: str) -> str:
    """The text of the file `full` in the sandbox.

    Raises:
        EditorError: it does not exist, or is a folder.
    """
    try:
        data = await sandbox.read_file(full)
    except FileNotFoundError as exc:
        raise EditorError(f"{full} does not exist; create it first") from exc
    except IsADirectoryError as exc:
        raise EditorError(f"{full} is a folder; view lists it, the other commands need a file") from exc
    return data.decode("utf-8", errors="replace")


def snippet(text: str, first_line: int, n_lines: int) -> str:
    """Numbered lines around an edit at `first_line` spanning `n_lines`."""
    start = max(first_line - SNIPPET_LINES, 1)
    end = first_line + n_lines - 1 + SNIPPET_LINES
    total = len(text.split("\n")) - (1 if text.endswith("\n") else 0)
    return view_text(text, [start, min(end, max(total, start))])


class EditorTool(Tool):
    """View, create and edit files in the sandbox."""

    name = "editor"
    description = (
        "View and edit files in your sandbox. Commands: `view` (a file with line numbers, optionally "
        "view_range [start, end]; or a folder's listing), `create` (a new file with file_text), `str_replace` "
        "(replace the exact, unique text old_str with new_str), `insert` (new_str after line insert_line; 0 = top). "
        "Paths are relative to /work or absolute."
    )
    parameters = {
        "type": "object",
        "properties": {
            "command": {"type": "string", "enum": ["view", "create", "str_replace", "insert"]},
            "path": {"type": "string", "description": "the file or folder"},
            "file_text": {"type": "string", "description": "create: the file's content"},
            "old_str": {"type": "string", "description": "str_replace: the exact text to replace"},
            "new_str": {"type": "string", "description": "str_replace / insert: the new text"},
            "insert_line": {"type": "integer", "description": "insert: the line after which to insert"},
            "view_range": {"type": "array", "items": {"type": "integer"}, "description": "view: [start, end]"},
        },
        "required": ["command", "path"],
    }

    async def execute(self, arguments: dict[str, Any], ctx: ToolContext) -> str:
        sandbox = require_sandbox(ctx, self.name)
        command, path = arguments["command"], arguments["path"]
        handler = getattr(self, f"_{command}", None)
        if handler is None:
            raise EditorError(f"unknown command {command!r}; use view, create, str_replace or insert")
        return await handler(sandbox, path, arguments)

    async def _view(self, sandbox: Any, path: str, args: dict[str, Any]) -> str:
        full = sandbox.resolve(path)
        listing = await sandbox.exec(
            f"if [ -d {shlex.quote(full)} ]; then find {shlex.quote(full)} -maxdepth 2 -not -path '*/.*' | sort; "
            "else exit 3; fi",
            timeout=10,
        )
        if listing.exit_code == 0:
            return f"Files and folders in {full} (2 levels, hidden ones left out):\n{listing.stdout}"
        text = await read_sandbox_text(sandbox, full)
        return f"{full}:\n{view_text(text, args.get('view_range'))}"

    async def _create(self, sandbox: Any, path: str, args: dict[str, Any]) -> str:
        if "file_text" not in args:
            raise EditorError("create needs file_text")
        full = sandbox.resolve(path)
        exists = await sandbox.exec(f"test -e {shlex.quote(full)}", timeout=10)
        if exists.exit_code == 0:
            raise EditorError(f"{full} already exists; edit it with str_replace or insert")
        await sandbox.write_file(full, args["file_text"])
        return f"Created {full}."

    async def _str_replace(self, sandbox: Any, path: str, args: dict[str, Any]) -> str:
        full = sandbox.resolve(path)
        new = args.get("new_str", "")
        text, line = replace_text(await read_sandbox_text(sandbox, full), args.get("old_str", ""), new)
        await sandbox.write_file(full, text)
        return f"Edited {full}. The changed region:\n{snippet(text, line, new.count(chr(10)) + 1)}"

    async def _insert(self, sandbox: Any, path: str, args: dict[str, Any]) -> str:
        if "insert_line" not in args or "new_str" not in args:
            raise EditorError("insert needs insert_line and new_str")
        full = sandbox.resolve(path)
        new, line = args["new_str"], args["insert_line"]
        text = insert_text(await read_sandbox_text(sandbox, full), line, new)
        await sandbox.write_file(full, text)
        return f"Inserted into {full}. The changed region:\n{snippet(text, line + 1, new.count(chr(10)) + 1)}"
