"""One prompt, one answer."""

from __future__ import annotations

from agentrl.loops.base import LoopOptions
from agentrl.loops.context import AgentContext
from agentrl.loops.stepped import SteppedLoop
from agentrl.types import Sample


class SingleTurnAgentLoop(SteppedLoop):
    """Generates one assistant turn for the prompt. It takes no `agent.kwargs`.

    Its state is empty, so it forks trivially; only a fork before the turn (`rollout.tree.branch_turns=[0]`) has
    anything to branch, and that is the same as `rollout.n` samples of the prompt."""

    Options = LoopOptions

    async def begin(self, sample: Sample, ctx: AgentContext) -> None:
        ctx.start(sample.prompt)

    async def step(self, ctx: AgentContext, state: None) -> bool:
        await ctx.generate()
        ctx.finish()
        return True

    async def end(self, ctx: AgentContext, state: None) -> None:
        return None

    async def fork_state(self, state: None, children: list[AgentContext]) -> list[None]:
        return [None] * len(children)

    async def discard(self, state: None) -> None:
        return None
