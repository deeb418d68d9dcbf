"""ToolAgentLoop: alternate generation and tool execution until the model answers without calling a tool."""

from __future__ import annotations

import hashlib
from typing import Any

from agentrl.config.schema import AgentConfig
from agentrl.loops.base import AgentLoopBase, LoopOptions
from agentrl.loops.context import AgentContext
from agentrl.loops.interaction import Interaction
from agentrl.loops.tool_turns import answer_calls, execute_calls
from agentrl.tools.parsers import get_parser
from agentrl.types import Message, Sample, Trajectory


class ToolAgentLoop(AgentLoopBase):
    """The generic tool-calling loop.

    Each turn: generate; parse tool calls with the configured parser (`agent.tool_parser`); run up to
    `agent.max_parallel_tool_calls` of them concurrently (the model is told about the skipped rest); append the
    results as tool messages. Ends when the model answers without a call (or the `Interaction` ends the dialogue),
    at a budget, or after `agent.max_consecutive_tool_errors` failing calls in a row.

    `ctx.tools` must be a `ToolSet` (the RolloutManager's tool setup attaches one). It takes no `agent.kwargs`.

    Per-turn credit (`trainer.advantage=turn_grpo` or `gigpo`): see `record_conversation_turns`.
    """

    Options = LoopOptions
    uses_tools = True
    records_turns = True

    def __init__(self, config: AgentConfig | None = None, interaction: Interaction | None = None, **kwargs: Any):
        super().__init__(config, **kwargs)
        self.parser = get_parser(self.config.tool_parser)
        self.interaction = interaction

    async def run(self, sample: Sample, ctx: AgentContext) -> Trajectory:
        try:
            return await self._converse(sample, ctx)
        finally:  # also when a budget or the tool-error limit ends it (StopLoop)
            record_conversation_turns(ctx.trajectory)

    async def _converse(self, sample: Sample, ctx: AgentContext) -> Trajectory:
        ctx.start(sample.prompt)
        state: dict[str, Any] = {}
        while True:
            turn = await ctx.generate()
            parsed = self.parser.parse(turn.text)
            if parsed.calls or parsed.errors:
                results = await execute_calls(ctx, parsed.calls, parsed.errors, self.config.max_parallel_tool_calls)
                answer_calls(ctx, results)
                continue
            reply = await self._user_turn(ctx, sample, state)
            if reply is None:
                ctx.finish()
                return ctx.trajectory
            ctx.add_messages([Message(role="user", content=reply)])

    async def _user_turn(self, ctx: AgentContext, sample: Sample, state: dict[str, Any]) -> str | None:
        if self.interaction is None:
            return None
        return await self.interaction.respond(ctx.trajectory.messages, sample, state)


def record_conversation_turns(traj: Trajectory) -> None:
    """Set `turn_rewards` and `turn_states` of a conversation scored only at its end.

    Every turn's own reward is 0, so the per-turn estimators credit the whole reward to the last turn (and
    `turn_grpo` discounts it back to the earlier ones). A turn's state is a digest of the tokens it starts from, so
    GiGPO anchors the turns that saw the same conversation so far (every group's first turns share one).
    """
    traj.turn_rewards, traj.turn_states = [], []
    for step in traj.step_samples():
        context = hashlib.sha1()  # grows with the conversation: each turn's key costs its new tokens only
        started = set()
        for segment, turn in zip(step.segments, step.turn_index(), strict=True):
            if turn is not None and turn not in started:
                started.add(turn)
                traj.turn_rewards.append(0.0)
                traj.turn_states.append(context.hexdigest())
            context.update(b"".join(t.to_bytes(4, "little") for t in segment.token_ids))
