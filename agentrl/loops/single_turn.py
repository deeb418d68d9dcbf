"""One prompt, one answer."""

from __future__ import annotations

from agentrl.loops.base import AgentLoopBase, LoopOptions
from agentrl.loops.context import AgentContext
from agentrl.types import Sample, Trajectory


class SingleTurnAgentLoop(AgentLoopBase):
    """Generates one assistant turn for the prompt. It takes no `agent.kwargs`."""

    Options = LoopOptions

    async def run(self, sample: Sample, ctx: AgentContext) -> Trajectory:
        ctx.start(sample.prompt)
        await ctx.generate()
        ctx.finish()
        return ctx.trajectory
