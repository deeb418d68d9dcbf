"""Tree rollouts: an episode stepped to its branch points, forked there with all its state, each child stepped on.

At each turn count in `TreeShape.branch_turns` (before that turn is generated) the running episode becomes
`width` children: the context's exact tokens so far (`AgentContext.fork`) and the loop's state
(`SteppedLoop.fork_state`: its environment, sandbox, tools). Every child samples with a seed of its own (derived
from its parent's and its place in the tree) when the parent's was seeded. The leaves are the trajectories; each
carries `metadata["tree"]`: the tree's id, its `path` (the child index taken at each branch point) and the
`branch_turns` it went through, from which `tree_nodes` rebuilds the tree for credit (`trainer.tree_advantages`).
A child that fails becomes a failed leaf; it never takes its siblings down.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentrl.config.schema import TreeConfig
from agentrl.errors import ForkUnsupportedError, UserError
from agentrl.loops.base import AgentLoopBase
from agentrl.loops.context import AgentContext, StopLoop
from agentrl.loops.failures import stop_reason_for
from agentrl.loops.jobs import derived_seed
from agentrl.loops.stepped import SteppedLoop
from agentrl.types import Sample, StopReason, Trajectory


@dataclass(frozen=True)
class TreeShape:
    """Where and how wide a tree branches.

    Attributes:
        branch_turns: the turn counts at which the episode forks (0: before the first turn), increasing.
        width: children per branch point (2 or more).
    """

    branch_turns: tuple[int, ...]
    width: int

    def __post_init__(self) -> None:
        turns = self.branch_turns
        if self.width < 2:
            raise UserError(f"a tree branches into 2 children or more, not {self.width}")
        if not turns or any(t < 0 for t in turns) or list(turns) != sorted(set(turns)):
            raise UserError(f"branch turns must be increasing turn counts >= 0, got {list(turns)}")

    @classmethod
    def of(cls, tree: TreeConfig) -> TreeShape:
        """The shape `rollout.tree` gives."""
        return cls(tuple(tree.branch_turns), tree.width)

    @property
    def leaves(self) -> int:
        """Leaves of a tree whose episodes all reach every branch point."""
        return self.width ** len(self.branch_turns)


def check_forkable(loop: AgentLoopBase) -> None:
    """Raises ForkUnsupportedError, naming the loop, when its episodes cannot be forked."""
    if not isinstance(loop, SteppedLoop):
        raise ForkUnsupportedError(
            f"the {type(loop).__name__} loop cannot be forked: tree rollouts need a SteppedLoop (begin, step, end, "
            "fork_state); run it without a tree"
        )


async def run_tree(loop: AgentLoopBase, sample: Sample, ctx: AgentContext, shape: TreeShape) -> list[Trajectory]:
    """Play the tree of `sample` from `ctx`; returns its leaves (fewer than `shape.leaves` when episodes end
    before a branch point). Never raises for a failing episode: it becomes a leaf with its error.

    Raises:
        ForkUnsupportedError: the loop cannot be forked.
    """
    check_forkable(loop)
    assert isinstance(loop, SteppedLoop)
    tree_id = ctx.trajectory.id
    try:
        state = await loop.begin(sample, ctx)
    except Exception as exc:
        _record_stop(ctx.trajectory, exc)
        _mark(ctx.trajectory, tree_id, ())
        return [ctx.trajectory]
    return await _grow(loop, ctx, state, shape, tree_id, ())


async def _grow(
    loop: SteppedLoop, ctx: AgentContext, state: Any, shape: TreeShape, tree_id: str, path: tuple[int, ...]
) -> list[Trajectory]:
    """Step the episode of `ctx` to its next branch point (then branch) or to its end (then it is a leaf)."""
    try:
        while not _at_branch(ctx, shape, path):
            if await loop.step(ctx, state):
                return await _leaf(loop, ctx, state, shape, tree_id, path)
    except Exception as exc:  # StopLoop: a budget ended it; anything else: this leaf failed, not its siblings
        return await _leaf(loop, ctx, state, shape, tree_id, path, exc)
    return await _branch(loop, ctx, state, shape, tree_id, path)


def _at_branch(ctx: AgentContext, shape: TreeShape, path: tuple[int, ...]) -> bool:
    return len(path) < len(shape.branch_turns) and ctx.trajectory.num_turns == shape.branch_turns[len(path)]


async def _branch(
    loop: SteppedLoop, ctx: AgentContext, state: Any, shape: TreeShape, tree_id: str, path: tuple[int, ...]
) -> list[Trajectory]:
    children = ctx.fork(shape.width)
    try:
        states = await loop.fork_state(state, children)
    except Exception as exc:
        return await _leaf(loop, ctx, state, shape, tree_id, path, exc)
    await loop.discard(state)
    for index, child in enumerate(children):
        if ctx.sampling.seed is not None:
            child.sampling = child.sampling.model_copy(update={"seed": child_seed(ctx.sampling.seed, index)})
    grown = await asyncio.gather(
        *(_grow(loop, c, s, shape, tree_id, (*path, i)) for i, (c, s) in enumerate(zip(children, states, strict=True)))
    )
    return [leaf for leaves in grown for leaf in leaves]


async def _leaf(
    loop: SteppedLoop,
    ctx: AgentContext,
    state: Any,
    shape: TreeShape,
    tree_id: str,
    path: tuple[int, ...],
    exc: Exception | None = None,
) -> list[Trajectory]:
    """End the episode of `ctx` as a leaf (with the stop reason or error `exc` gives, if any)."""
    traj = ctx.trajectory
    if exc is not None:
        _record_stop(traj, exc)
    try:
        await loop.end(ctx, state)
    except Exception as error:  # as in a plain run, where `end` raising fails the trajectory
        if exc is None or isinstance(exc, StopLoop):
            _record_stop(traj, error)
    if traj.stop_reason is None:
        traj.stop_reason = StopReason.DONE
    _mark(traj, tree_id, path, shape.branch_turns[: len(path)])
    return [traj]


def child_seed(seed: int, index: int) -> int:
    """The sampling seed of child `index` of a node sampled with `seed` (31 bits, far from its siblings')."""
    return derived_seed(seed, "fork", index)


def _mark(traj: Trajectory, tree_id: str, path: tuple[int, ...], branch_turns: Sequence[int] = ()) -> None:
    traj.metadata["tree"] = {"id": tree_id, "path": list(path), "branch_turns": list(branch_turns)}


def _record_stop(traj: Trajectory, exc: Exception) -> None:
    """The stop reason `exc` means (a budget's `StopLoop`, or a failure with its error)."""
    if isinstance(exc, StopLoop):
        traj.stop_reason = exc.reason
    else:
        traj.stop_reason, traj.error = stop_reason_for(exc), f"{type(exc).__name__}: {exc}"
