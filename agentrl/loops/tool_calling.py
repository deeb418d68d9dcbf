"""ToolAgentLoop: alternate generation and tool execution until the model answers without calling a tool."""

from __future__ import annotations

import asyncio
from typing import Any

from agentrl.loops.base import AgentLoopBase
from agentrl.loops.context import AgentContext, StopLoop
from agentrl.loops.interaction import Interaction
from agentrl.tools.base import ToolCall, ToolResult
from agentrl.tools.parsers import get_parser
from agentrl.types import Message, Sample, StopReason, Trajectory


class ToolAgentLoop(AgentLoopBase):
    """The generic tool-calling loop.

    Each turn: generate; parse tool calls with the configured parser (`agent.tool_parser`); run up to
    `agent.max_parallel_tool_calls` of them concurrently (the model is told about the skipped rest); append the
    results as tool messages. Ends when the model answers without a call (or the `Interaction` ends the dialogue),
    at a budget, or after `agent.max_consecutive_tool_errors` failing calls in a row.

    `ctx.tools` must be a `ToolSet` (the RolloutManager's tool setup attaches one).
    """

    uses_tools = True

    def __init__(self, config: Any = None, interaction: Interaction | None = None, **kwargs: Any):
        super().__init__(config, **kwargs)
        self.parser = get_parser(self.config.tool_parser)
        self.interaction = interaction

    async def run(self, sample: Sample, ctx: AgentContext) -> Trajectory:
        ctx.start(sample.prompt)
        state: dict[str, Any] = {}
        while True:
            turn = await ctx.generate()
            parsed = self.parser.parse(turn.text)
            if parsed.calls or parsed.errors:
                await self._run_tools(ctx, parsed.calls, parsed.errors)
                continue
            reply = await self._user_turn(ctx, sample, state)
            if reply is None:
                ctx.finish()
                return ctx.trajectory
            ctx.add_messages([Message(role="user", content=reply)])

    async def _run_tools(self, ctx: AgentContext, calls: list[ToolCall], errors: list[str]) -> None:
        toolset = ctx.tools
        if toolset is None:
            raise RuntimeError("ToolAgentLoop needs ctx.tools; configure `tools:` for this recipe")
        limit = self.config.max_parallel_tool_calls
        results: list[ToolResult] = [toolset.record_parse_error(e) for e in errors]
        results += await asyncio.gather(*(toolset.execute(c) for c in calls[:limit]))
        results += [_skipped(c, limit) for c in calls[limit:]]
        ctx.trajectory.metrics.update(toolset.metrics)
        ctx.add_messages([_tool_message(r) for r in results])
        if toolset.error_limit_reached():
            raise StopLoop(StopReason.TOOL_ERROR_LIMIT, f"{toolset.consecutive_errors} tool errors in a row")

    async def _user_turn(self, ctx: AgentContext, sample: Sample, state: dict[str, Any]) -> str | None:
        if self.interaction is None:
            return None
        return await self.interaction.respond(ctx.trajectory.messages, sample, state)


def _skipped(call: ToolCall, limit: int) -> ToolResult:
    return ToolResult(
        call_id=call.id,
        name=call.name,
        content=f"Error: only {limit} tool calls are executed per turn; this call to {call.name!r} was skipped. "
        "Call it again in your next turn.",
        is_error=True,
    )


def _tool_message(result: ToolResult) -> Message:
    return Message(role="tool", content=result.content, name=result.name, tool_call_id=result.call_id)
