"""`run_tests`: run a test (or a test file) of the repository with pytest, and read the end of its report.

The output is trimmed by one generic rule, whatever the task, chosen by `report`: `tail` shows pytest's short
tracebacks, stopping at the first failure, no warnings summary (it would push the traceback out of the tail), and
only the last `max_lines` lines (where pytest puts the failure); `frame` shows the frame the first failure's error was
raised in (pytest's long traceback, its last `max_lines` lines), or the tail when nothing failed.
"""

from __future__ import annotations

import shlex
from typing import Any, Literal

from pydantic import Field

from agentrl.tools.base import Tool, ToolContext, ToolResult
from agentrl.tools.builtin.common import ArgumentOptions, require_sandbox
from agentrl.tools.builtin.pytest_report import first_failure_frame

PYTEST = "python3 -m pytest -x -q -p no:cacheprovider -p no:warnings -o addopts='' --no-header"
TRACEBACK = {"tail": "--tb=short", "frame": "--tb=long -rN"}
FRAME_HEADER = "A test fails here:"  # not the test's name: a small model copies it as the path to edit


class RunTestsOptions(ArgumentOptions):
    """`config:` of `run_tests`."""

    max_lines: int = Field(30, ge=5, description="the last lines of pytest's output shown")
    timeout_s: float = Field(60.0, gt=0, description="timeout of one test run")
    setup: str = Field("", description="shell lines run before pytest (an environment's activation)")
    report: Literal["tail", "frame"] = Field(
        "tail",
        description="what is shown: the last max_lines lines of pytest's report (tail), or the frame the first "
        "failure's error was raised in, its last max_lines lines (frame; the tail when nothing failed)",
    )


class RunTestsTool(Tool):
    """Run one test, a test file, or all the tests, with pytest; answers the end of its report."""

    name = "run_tests"
    description = (
        "Run the test `test` with pytest (a test id such as `tests/test_x.py::test_name`, a test file, or nothing "
        "for all the tests), stopping at the first failure. Answers the end of pytest's report: which test failed, "
        "where, and why."
    )
    parameters = {
        "type": "object",
        "properties": {"test": {"type": "string", "description": "a test id or a test file (default: all)"}},
        "required": [],
    }
    config_model = RunTestsOptions
    cfg: RunTestsOptions

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__(config)
        self.timeout_s = self.cfg.timeout_s + 15  # the sandbox's own timeout fires first, with the output

    async def execute(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        sandbox = require_sandbox(ctx, self.name)
        test = str(arguments.get("test") or "").strip()
        command = f"{PYTEST} {TRACEBACK[self.cfg.report]}"
        command = f"{command} {shlex.quote(test)}" if test else command
        if self.cfg.setup:
            command = f"{self.cfg.setup}\n{command}"
        result = await sandbox.exec(command, timeout=self.cfg.timeout_s)
        output = result.stdout + result.stderr
        frame = first_failure_frame(output, self.cfg.max_lines) if self.cfg.report == "frame" else None
        content = f"{FRAME_HEADER}\n\n```\n{frame}\n```" if frame else self._tail(output)
        if result.timed_out:
            content += f"\n[timed out after {self.cfg.timeout_s:g}s]"
        return ToolResult(call_id="", name="", content=content)

    def _tail(self, output: str) -> str:
        lines = output.rstrip("\n").splitlines()
        shown = lines[-self.cfg.max_lines :]
        head = "" if len(lines) <= self.cfg.max_lines else f"[{len(lines) - len(shown)} earlier lines not shown]\n"
        return head + "\n".join(shown) or "[no output]"
