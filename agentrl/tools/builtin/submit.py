"""`submit`: the model hands in its final answer; the agent loop sees `metadata["submitted"]` and stops."""

from __future__ import annotations

from typing import Any

from agentrl.tools.base import Tool, ToolContext, ToolResult


class SubmitTool(Tool):
    """Hand in the final answer. Needs no sandbox; records the answer in `ctx.shared["submission"]` too."""

    name = "submit"
    description = "Submit your final answer when you are done. This ends the episode."
    parameters = {
        "type": "object",
        "properties": {"answer": {"type": "string", "description": "your final answer (may be empty)"}},
    }

    async def execute(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        answer = str(arguments.get("answer", ""))
        ctx.shared["submission"] = answer
        return ToolResult(call_id="", name="", content="Submitted.",
                          metadata={"submitted": True, "answer": answer})  # fmt: skip
