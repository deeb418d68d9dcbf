"""`bash` and `python`: run code in the trajectory's sandbox."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from agentrl.tools.base import Tool, ToolContext, ToolResult
from agentrl.tools.builtin.common import render_exec, require_sandbox


class ShellConfig(BaseModel):
    timeout_s: float = Field(30.0, gt=0, description="timeout of one command in the sandbox")


class BashTool(Tool):
    """Run a bash command in the sandbox; the model reads stdout, stderr and the exit code."""

    name = "bash"
    description = (
        "Run a bash command in your sandbox (a Linux container, working folder /work, no network). "
        "Returns stdout, stderr and the exit code."
    )
    parameters = {
        "type": "object",
        "properties": {"command": {"type": "string", "description": "the bash command to run"}},
        "required": ["command"],
    }
    config_model = ShellConfig

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__(config)
        self.command_timeout_s = self.cfg.timeout_s
        self.timeout_s = self.command_timeout_s + 15  # the sandbox's own timeout fires first, with the output

    async def execute(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        sandbox = require_sandbox(ctx, self.name)
        result = await sandbox.exec(arguments["command"], timeout=self.command_timeout_s)
        return render_exec(result, self.command_timeout_s)


class PythonTool(BashTool):
    """Run a Python program in the sandbox with `python3`."""

    name = "python"
    description = (
        "Run a Python 3 program in your sandbox (working folder /work, no network). "
        "Print what you want to see; returns stdout, stderr and the exit code."
    )
    parameters = {
        "type": "object",
        "properties": {"code": {"type": "string", "description": "the Python source to run"}},
        "required": ["code"],
    }

    async def execute(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        sandbox = require_sandbox(ctx, self.name)
        # the code travels in the environment: no quoting, no temporary file
        env = {"AGENTRL_PYTHON_CODE": arguments["code"]}
        result = await sandbox.exec('python3 -c "$AGENTRL_PYTHON_CODE"', timeout=self.command_timeout_s, env=env)
        return render_exec(result, self.command_timeout_s)
