"""One prompt, one answer."""

from __future__ import annotations

from agentrl.loops.base import AgentLoopBase
from agentrl.loops.context import AgentContext
from agentrl.types import Sample, Trajectory


class SingleTurnAgentLoop(AgentLoopBase):
    """Generates one assistant turn for the prompt."""

    async def run(self, sample: Sample, ctx: AgentContext) -> Trajectory:
        ctx.start(sample.prompt)
        await ctx.generate()
        ctx.finish()
        return ctx.trajectory
