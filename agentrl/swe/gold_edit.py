"""The one line a task's gold patch changes, read from its unified diff: the edit `agentrl check loop=swe_agent`
answers with (an `edit_line` call), so that the check plays the task's tool in its container as a solver would."""

from __future__ import annotations

import re
from dataclasses import dataclass

_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+\d+(?:,\d+)? @@")


@dataclass(frozen=True)
class LineFix:
    """The gold patch's one changed line: in `path`, line `line` (1-based, as the task's repository has it) reads
    `old` and is fixed to `new`."""

    path: str
    line: int
    old: str
    new: str


def one_line_fix(patch: str) -> LineFix | None:
    """The fix of a patch that replaces exactly one line of one file by one other line; None for any other patch."""
    paths: list[str] = []
    removed: list[tuple[int, str]] = []
    added: list[str] = []
    old_line = 0  # the old side's number of the hunk's next line; 0 outside a hunk (in a file's header)
    for text in patch.splitlines():
        if text.startswith("diff "):
            old_line = 0
        elif hunk := _HUNK.match(text):
            old_line = int(hunk.group(1))
        elif not old_line:
            paths += [text[len("+++ b/") :]] if text.startswith("+++ b/") else []
        elif text.startswith("-"):
            removed.append((old_line, text[1:]))
            old_line += 1
        elif text.startswith("+"):
            added.append(text[1:])
        elif text.startswith(" "):
            old_line += 1
    if len(paths) != 1 or len(removed) != 1 or len(added) != 1 or not removed[0][1].strip():
        return None
    (line, old), (new,) = removed[0], added
    return LineFix(paths[0], line, old, new)


__all__ = ["LineFix", "one_line_fix"]
