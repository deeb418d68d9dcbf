"""ToolAgentLoop: alternate generation and tool execution until the model answers without calling a tool."""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass, field
from typing import Any

from agentrl.config.schema import AgentConfig
from agentrl.loops.base import LoopOptions
from agentrl.loops.conformance.case import LoopCheckCase
from agentrl.loops.context import AgentContext
from agentrl.loops.forked_resources import OwnedResources, fork_sandbox_and_tools
from agentrl.loops.interaction import Interaction
from agentrl.loops.stepped import SteppedLoop
from agentrl.loops.tool_turns import answer_calls, execute_calls
from agentrl.tools.parsers import get_parser
from agentrl.types import Message, Sample, Trajectory


class ToolAgentLoop(SteppedLoop):
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
    compacts_context = True  # agent.context: old tool outputs dropped, a window, or a summary
    roles = ("agent",)  # agent.roles={agent: NAME}: the policy that plays it, in a run with several

    @classmethod
    def check_case(cls) -> LoopCheckCase:
        """A calculator call in hermes format, then the answer."""
        sample = Sample(prompt=[Message(role="user", content="What is 12 * 34?")])
        config = {
            "tools": [{"class": "calculator"}],
            "agent": {"tool_parser": "hermes"},
            "rollout": {"max_tokens": 128},
        }
        return LoopCheckCase(config=config, sample=sample, reply=_check_reply, min_turns=2)

    def __init__(self, config: AgentConfig | None = None, interaction: Interaction | None = None, **kwargs: Any):
        super().__init__(config, **kwargs)
        self.parser = get_parser(self.config.tool_parser)
        self.interaction = interaction

    async def begin(self, sample: Sample, ctx: AgentContext) -> ToolLoopState:
        ctx.start(sample.prompt)
        return ToolLoopState(sample)

    async def step(self, ctx: AgentContext, state: ToolLoopState) -> bool:
        turn = await ctx.generate(policy=self.policy_for("agent"))
        parsed = self.parser.parse(turn.text)
        if parsed.calls or parsed.errors:
            results = await execute_calls(ctx, parsed.calls, parsed.errors, self.config.max_parallel_tool_calls)
            answer_calls(ctx, results)
            return False
        reply = await self._user_turn(ctx, state)
        if reply is None:
            ctx.finish()
            return True
        ctx.add_messages([Message(role="user", content=reply)])
        return False

    async def end(self, ctx: AgentContext, state: ToolLoopState) -> None:
        # also when a budget or the tool-error limit ended it (StopLoop)
        record_conversation_turns(ctx.trajectory)
        await state.release(ctx)

    async def fork_state(self, state: ToolLoopState, children: list[AgentContext]) -> list[ToolLoopState]:
        """Each child gets a fork of the sandbox (`Sandbox.fork`: its files, not its processes), the tools over it
        (`ToolSet.fork`: their counters and shared state) and a copy of the interaction's state."""
        owned = await fork_sandbox_and_tools(children[0].sandbox, children)
        return [ToolLoopState(state.sample, copy.deepcopy(state.interaction), resources) for resources in owned]

    async def discard(self, state: ToolLoopState) -> None:
        await state.release()

    async def prepare_fork(self, ctx: AgentContext, state: ToolLoopState, children: int) -> None:
        if ctx.sandbox is not None:
            await ctx.sandbox.prepare_forks(children)

    async def _user_turn(self, ctx: AgentContext, state: ToolLoopState) -> str | None:
        if self.interaction is None:
            return None
        return await self.interaction.respond(ctx.trajectory.messages, state.sample, state.interaction)


@dataclass
class ToolLoopState:
    """What the tool loop keeps between turns: its sample, the interaction's state and, in a forked episode, the
    tools and sandbox the fork made (the root's belong to the run's setup, which releases them)."""

    sample: Sample
    interaction: dict[str, Any] = field(default_factory=dict)
    owned: OwnedResources | None = None

    async def release(self, ctx: AgentContext | None = None) -> None:
        if self.owned is not None:
            await self.owned.release()


def _check_reply(conversation: str) -> str:
    """`check_case`'s agent: calls the calculator, then answers with what it returned."""
    if "408" in conversation:
        return "12 * 34 = 408."
    return '<tool_call>\n{"name": "calculator", "arguments": {"expression": "12 * 34"}}\n</tool_call>'


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
