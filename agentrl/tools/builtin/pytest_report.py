"""Reading pytest's long report: the frame a failure was raised in.

pytest prints each failure's traceback frame by frame, the frame that raised last: its source lines, the `>` line it
stopped at, the `E` lines of the error and a `path:line: Error` footer. That frame, cut to its last lines, is what
both the easy SWE tier's issue and `run_tests` in its `frame` report show.
"""

from __future__ import annotations

import re

FAILURE_HEADER = re.compile(r"^_{3,} \S.*? _{3,}$")


def last_frame(traceback: str, max_lines: int) -> str:
    """The last entry of a pytest traceback (the frame that raised): its source lines, `>` and `E` lines and the
    `path:line: Error` footer, without the argument values pytest prints above it; its last `max_lines` lines."""
    lines = traceback.rstrip().splitlines()
    seps = [i for i, line in enumerate(lines) if line.strip() and set(line.strip()) <= {"_", " "}]
    frame = lines[seps[-1] + 1 :] if seps else lines
    while frame and not frame[0].startswith(("    ", ">")):
        frame = frame[1:]
    return "\n".join(frame[-max_lines:])


def first_failure_frame(report: str, max_lines: int) -> str | None:
    """The last frame of the first failure, from the output of `pytest --tb=long`; None when the report holds no
    failure section (every test passed, or collection failed)."""
    lines = report.splitlines()
    starts = [i for i, line in enumerate(lines) if FAILURE_HEADER.match(line)]
    if not starts:
        return None
    end = next((i for i in range(starts[0] + 1, len(lines)) if _ends_failure(lines[i])), len(lines))
    if len(starts) > 1:
        end = min(end, starts[1])
    return last_frame("\n".join(lines[starts[0] + 1 : end]), max_lines) or None


def _ends_failure(line: str) -> bool:
    """A line pytest prints after the failures: a `===` section or the `!!! stopping after` banner."""
    return line.startswith(("====", "!!!!"))
