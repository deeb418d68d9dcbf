"""`run_tests`: run a test (or a test file) of the repository with pytest, and read the end of its report.

The output is trimmed by one generic rule, whatever the task: pytest's short tracebacks, stopping at the first
failure, no warnings summary (it would push the traceback out of the tail), and only the last `max_lines` lines
(where pytest puts the failure).
"""

from __future__ import annotations

import shlex
from typing import Any

from pydantic import Field

from agentrl.tools.base import Tool, ToolContext, ToolResult
from agentrl.tools.builtin.common import ArgumentOptions, require_sandbox

PYTEST = "python3 -m pytest -x -q -p no:cacheprovider -p no:warnings -o addopts='' --tb=short --no-header"


class RunTestsOptions(ArgumentOptions):
    """`config:` of `run_tests`."""

    max_lines: int = Field(30, ge=5, description="the last lines of pytest's output shown")
    timeout_s: float = Field(60.0, gt=0, description="timeout of one test run")
    setup: str = Field("", description="shell lines run before pytest (an environment's activation)")


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
        command = f"{PYTEST} {shlex.quote(test)}" if test else PYTEST
        if self.cfg.setup:
            command = f"{self.cfg.setup}\n{command}"
        result = await sandbox.exec(command, timeout=self.cfg.timeout_s)
        lines = (result.stdout + result.stderr).rstrip("\n").splitlines()
        shown = lines[-self.cfg.max_lines :]
        head = "" if len(lines) <= self.cfg.max_lines else f"[{len(lines) - len(shown)} earlier lines not shown]\n"
        if result.timed_out:
            shown.append(f"[timed out after {self.cfg.timeout_s:g}s]")
        return ToolResult(call_id="", name="", content=head + "\n".join(shown) or "[no output]")
