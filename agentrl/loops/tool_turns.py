"""One tool turn, shared by the tool-calling loops (`tool_agent`, `swe_agent`): run the parsed calls, append the
results as tool messages, and stop at the consecutive-error limit."""

from __future__ import annotations

import asyncio

from agentrl.loops.context import AgentContext, StopLoop
from agentrl.tools.base import ToolCall, ToolResult
from agentrl.tools.toolset import ToolSet
from agentrl.types import Message, StopReason


def require_tools(ctx: AgentContext, loop: str) -> ToolSet:
    """`ctx.tools`, or an error saying to configure `tools:` for `loop`."""
    if ctx.tools is None:
        raise RuntimeError(f"the {loop} loop needs ctx.tools; configure `tools:` for this recipe")
    return ctx.tools


async def execute_calls(ctx: AgentContext, calls: list[ToolCall], errors: list[str], limit: int) -> list[ToolResult]:
    """Results of one turn's calls: parse errors first, then up to `limit` calls run concurrently, then a
    "skipped" error for each call past the limit. Tool failures come back as error results, never raised."""
    tools = require_tools(ctx, "tool-calling")
    results = [tools.record_parse_error(e) for e in errors]
    results += await asyncio.gather(*(tools.execute(c) for c in calls[:limit]))
    results += [skipped(c, limit) for c in calls[limit:]]
    ctx.trajectory.metrics.update(tools.metrics)
    return results


def answer_calls(ctx: AgentContext, results: list[ToolResult]) -> None:
    """Append `results` as tool messages; raise StopLoop(tool_error_limit) once too many errors came in a row."""
    ctx.add_messages([tool_message(r) for r in results])
    tools = require_tools(ctx, "tool-calling")
    if tools.error_limit_reached():
        raise StopLoop(StopReason.TOOL_ERROR_LIMIT, f"{tools.consecutive_errors} tool errors in a row")


def record_final_calls(ctx: AgentContext, results: list[ToolResult]) -> None:
    """Record the calls of a turn that ended the episode (a submission), whose results are never shown to the model,
    as `trajectory.metadata["final_tool_calls"]` (their tool names), so that rewards that count calls see them."""
    ctx.trajectory.metadata["final_tool_calls"] = [r.name for r in results]


def skipped(call: ToolCall, limit: int) -> ToolResult:
    """The error result of a call past the per-turn limit."""
    return ToolResult(
        call_id=call.id,
        name=call.name,
        content=f"Error: only {limit} tool calls are executed per turn; this call to {call.name!r} was skipped. "
        "Call it again in your next turn.",
        is_error=True,
    )


def tool_message(result: ToolResult) -> Message:
    """A tool result as the chat message the model reads."""
    return Message(role="tool", content=result.content, name=result.name, tool_call_id=result.call_id)
