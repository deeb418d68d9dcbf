"""`SteppedLoop`: an agent loop written as steps between turn boundaries, so that a running episode can be forked.

A plain `AgentLoopBase.run` is one coroutine: nothing can copy it half-way. A `SteppedLoop` keeps everything it
needs between turns in a state object of its own and declares how that state is copied (`fork_state`); `run` is
derived from the steps. A tree rollout (`agentrl.loops.tree`) steps an episode to a branch point, forks the
context (the exact tokens so far) and the loop's state (its environment, sandbox, tools), and steps each child on.

    class MyLoop(SteppedLoop):
        async def begin(self, sample, ctx): ...        # render the prompt, open the environment; returns the state
        async def step(self, ctx, state): ...          # one turn; True when the episode is over
        async def end(self, ctx, state): ...           # record the outcome and free what the state holds
        async def fork_state(self, state, children): ...   # one state per child context, each a true copy
        async def discard(self, state): ...            # free a state that forked (its episode goes on in children)
        async def fail(self, ctx, state): ...          # optional: free it after an error (default: end)
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, ClassVar

from agentrl.loops.base import AgentLoopBase
from agentrl.loops.context import AgentContext, StopLoop
from agentrl.types import Sample, Trajectory


class SteppedLoop(AgentLoopBase):
    """An agent loop in steps, whose episodes can be forked at turn boundaries (see the module docstring)."""

    forkable: ClassVar[bool] = True
    """False for a stepped loop whose episodes are not worth forking (one turn, no model); refused in trees."""

    @abstractmethod
    async def begin(self, sample: Sample, ctx: AgentContext) -> Any:
        """Start the episode (render the prompt, open what it needs); returns the loop's state."""

    @abstractmethod
    async def step(self, ctx: AgentContext, state: Any) -> bool:
        """Play one turn; True when the episode is over. A budget may end it by raising `StopLoop`."""

    @abstractmethod
    async def end(self, ctx: AgentContext, state: Any) -> None:
        """Record the episode's outcome on `ctx.trajectory` and free what `state` holds (also after errors)."""

    @abstractmethod
    async def fork_state(self, state: Any, children: list[AgentContext]) -> list[Any]:
        """One copy of `state` per child context (already forked by `AgentContext.fork`), each continuing exactly
        where `state` is; sets what each child's context needs (`ctx.env`, `ctx.sandbox`, `ctx.tools`).

        Raises:
            ForkUnsupportedError: something the state holds cannot be copied (named in the message).
        """

    @abstractmethod
    async def discard(self, state: Any) -> None:
        """Free a state whose episode was forked: its children go on, it records nothing."""

    async def prepare_fork(self, ctx: AgentContext, state: Any, children: int) -> None:
        """Called before the turn after which the episode will fork into `children`: start what the fork will need
        (a sandbox's containers: `Sandbox.prepare_forks`) while the turn is played. Optional; does nothing here."""
        return None

    async def fail(self, ctx: AgentContext, state: Any) -> None:
        """Free what `state` holds after the episode failed (an error, not a budget's `StopLoop`): its outcome is
        not recorded, since the trajectory is not trained on. Default: `end`."""
        await self.end(ctx, state)

    async def run(self, sample: Sample, ctx: AgentContext) -> Trajectory:
        state = await self.begin(sample, ctx)
        try:
            while not await self.step(ctx, state):
                pass
        except StopLoop:
            await self.end(ctx, state)
            raise
        except BaseException:
            await self.fail(ctx, state)
            raise
        await self.end(ctx, state)
        return ctx.trajectory
