"""Tree rollouts: an episode stepped to its branch points, forked there with all its state, each child stepped on.

At each branch point (before the next turn is generated; where `TreeShape` says: fixed turns, every k turns, or
after an uncertain turn, while the tree's budget lasts) the running episode becomes `width` children: the context's
exact tokens so far (`AgentContext.fork`) and the loop's state (`SteppedLoop.fork_state`: its environment, sandbox,
tools). With `resample_uncertain` the branch point is the state before an uncertain turn: the episode is copied
before each turn that may fork, and when the turn was uncertain the episode as played becomes the first child and
the copy the others, which sample that turn again (`_Tree.resample`). Every child samples with a seed of its own
(derived from its parent's and its place in the tree) when the parent's was seeded, and at `child_temperature` when
that is set and the fork comes after a turn (siblings from one state that differ more; their segments record it, so
the trainer stays exact). The leaves are the trajectories; each carries `metadata["tree"]`: the tree's id, its
`path` (the child index taken at each branch point) and the `branch_turns` it went through, from which `tree_nodes`
rebuilds the tree for credit (`trainer.tree_advantages`), and the whole tree's cost: `tokens` generated and
`tool_calls` made, each node counted once. A child that fails becomes a failed leaf; it never takes its siblings
down.

Each node holds a quota: its share of the tree's width^depth leaves (a branch splits it among the children). With
`fill`, an episode that ends holding more than one leaf's quota hands the rest back: the tree starts that many more
first branches from the prompt (`loop.begin` on a fresh context, as the root was started), so that a tree whose
episodes end early still has as many leaves as a full one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentrl.errors import ForkUnsupportedError
from agentrl.loops.base import AgentLoopBase
from agentrl.loops.context import AgentContext, StopLoop
from agentrl.loops.failures import stop_reason_for
from agentrl.loops.jobs import derived_seed
from agentrl.loops.stepped import SteppedLoop
from agentrl.loops.tree_shape import TreeBudget, TreeShape, usage
from agentrl.types import Sample, StopReason, Trajectory

logger = logging.getLogger(__name__)

__all__ = ["TreeShape", "check_forkable", "child_seed", "run_tree"]


def check_forkable(loop: AgentLoopBase) -> None:
    """Raises ForkUnsupportedError, naming the loop, when its episodes cannot be forked."""
    if not isinstance(loop, SteppedLoop) or not loop.forkable:
        raise ForkUnsupportedError(
            f"the {type(loop).__name__} loop cannot be forked: tree rollouts need a SteppedLoop (begin, step, end, "
            "fork_state); run it without a tree"
        )


async def run_tree(loop: AgentLoopBase, sample: Sample, ctx: AgentContext, shape: TreeShape) -> list[Trajectory]:
    """Play the tree of `sample` from `ctx`; returns its leaves (fewer than `shape.leaves` when episodes end
    before a branch point, or the tree's budget is spent). Never raises for a failing episode: it becomes a leaf
    with its error.

    Raises:
        ForkUnsupportedError: the loop cannot be forked.
    """
    check_forkable(loop)
    assert isinstance(loop, SteppedLoop)
    fresh = ctx.fork(1)[0] if shape.fill else None  # before `begin`: where the branches `fill` adds start from
    tree = _Tree(loop, shape, ctx.trajectory.id, TreeBudget(shape), sample, fresh)
    try:
        state = await loop.begin(sample, ctx)
    except Exception as exc:
        _record_stop(ctx.trajectory, exc)
        _mark(ctx.trajectory, tree.id, (), ())
        return [ctx.trajectory]
    leaves = await tree.grow(ctx, state, (), (), shape.leaves)
    if tree.refilled:
        _root_as_first_branch(leaves)
    for leaf in leaves:  # the whole tree's cost, each node counted once (the leaves each hold their own path)
        leaf.metadata["tree"] |= {"tokens": tree.budget.tokens, "tool_calls": tree.budget.tool_calls}
    return leaves


@dataclass
class _Tree:
    """One tree being played: its loop, shape, id, the budget its episodes share, and (with `fill`) its sample and
    the fresh context its added first branches start from."""

    loop: SteppedLoop
    shape: TreeShape
    id: str
    budget: TreeBudget
    sample: Sample
    fresh: AgentContext | None = None
    next_first: int = 1  # the path index of the next first branch `fill` adds (0: the root's, should it not fork)
    refilled: bool = False  # whether `fill` started first branches

    async def grow(
        self, ctx: AgentContext, state: Any, path: tuple[int, ...], taken: tuple[int, ...], quota: int
    ) -> list[Trajectory]:
        """Step the episode of `ctx` (at `path`, forked at the turns `taken`, `quota` leaves its share) to its next
        branch point (then branch) or to its end (then it is a leaf)."""
        try:
            while self.budget.spent or quota == 1 or not self.shape.branches_here(ctx.trajectory, taken):
                may_fork = not self.budget.spent and quota > 1
                if may_fork and self.shape.branches_after_next_turn(ctx.trajectory, taken):
                    await self._prepare(ctx, state)
                snapshot = await self._snapshot(ctx, state) if may_fork and self.shape.snapshots_before(
                    ctx.trajectory, taken) else None  # fmt: skip
                before, stop = usage(ctx.trajectory), None
                try:
                    done = await self.loop.step(ctx, state)
                except StopLoop as exc:  # a limit ended the episode at this turn, which was played all the same
                    done, stop = True, exc
                except BaseException:
                    await self._drop(snapshot)
                    raise
                finally:
                    self.budget.add(before, ctx.trajectory)
                if snapshot is not None:
                    if not self.budget.spent and self.shape.uncertain(ctx.trajectory):
                        return await self.resample(snapshot, ctx, state, stop or done, path, taken, quota)
                    await self._drop(snapshot)
                if stop is not None:
                    raise stop
                if done:
                    return await self.leaf(ctx, state, path, taken, quota)
        except Exception as exc:  # StopLoop: a budget ended it; anything else: this leaf failed, not its siblings
            return await self.leaf(ctx, state, path, taken, quota, exc)
        except asyncio.CancelledError:  # Ctrl-C, a timeout: free the episode's sandbox now, not at exit
            with contextlib.suppress(Exception):
                await asyncio.shield(self.loop.fail(ctx, state))
            raise
        return await self.branch(ctx, state, path, (*taken, ctx.trajectory.num_turns), quota)

    async def _prepare(self, ctx: AgentContext, state: Any) -> None:
        """Start what the coming fork needs during the turn; only a speed-up, so its failure is logged."""
        try:
            await self.loop.prepare_fork(ctx, state, self.shape.width)
        except Exception:
            logger.warning("preparing the fork of trajectory %s failed", ctx.trajectory.id, exc_info=True)

    async def _snapshot(self, ctx: AgentContext, state: Any) -> tuple[AgentContext, Any] | None:
        """A copy of the episode as it is before its next turn (`resample_uncertain`); None when copying fails, and
        the episode then goes on without forking there."""
        (copy,) = ctx.fork(1)
        try:
            (copy_state,) = await self.loop.fork_state(state, [copy])
        except Exception:
            logger.warning("copying trajectory %s before its turn failed; it forks not there", ctx.trajectory.id,
                           exc_info=True)  # fmt: skip
            return None
        return copy, copy_state

    async def _drop(self, snapshot: tuple[AgentContext, Any] | None) -> None:
        """Free a copy made before a turn that did not fork (also when the turn failed or was cancelled)."""
        if snapshot is not None:
            try:
                await asyncio.shield(self.loop.discard(snapshot[1]))
            except Exception:
                logger.exception("freeing a copy of trajectory %s failed", snapshot[0].trajectory.id)

    async def resample(
        self,
        snapshot: tuple[AgentContext, Any],
        ctx: AgentContext,
        state: Any,
        done: bool | StopLoop,
        path: tuple[int, ...],
        taken: tuple[int, ...],
        quota: int,
    ) -> list[Trajectory]:
        """The turn `ctx` just played was uncertain: fork at `snapshot`, the state before it. The episode as played
        is the first child (a leaf when the turn ended it: `done`, or the `StopLoop` a limit raised); the copy
        (forked again for a wider tree) holds the others, which sample the turn anew."""
        copy, copy_state = snapshot
        siblings = [(copy, copy_state)]
        more = copy.fork(min(self.shape.width, quota) - 2)
        if more:
            try:
                siblings += zip(more, await self.loop.fork_state(copy_state, more), strict=True)
            except Exception:  # fewer siblings, not a failed episode
                logger.warning("forking trajectory %s again failed", copy.trajectory.id, exc_info=True)
            except asyncio.CancelledError:  # the episode as played is freed by `grow`; the copy is freed here
                await self._drop(snapshot)
                raise
        quotas = split(quota, 1 + len(siblings))
        taken = (*taken, copy.trajectory.num_turns)
        if not path:
            self.next_first = len(quotas) if taken[-1] == 0 else 1
        self.set_child_sampling(copy, [ctx] + [c for c, _ in siblings])
        played = (
            self.leaf(ctx, state, (*path, 0), taken, quotas[0], done if isinstance(done, StopLoop) else None)
            if done
            else self.grow(ctx, state, (*path, 0), taken, quotas[0])
        )
        grown = await asyncio.gather(
            played,
            *(
                self.grow(child, child_state, (*path, i), taken, share)
                for i, ((child, child_state), share) in enumerate(zip(siblings, quotas[1:], strict=True), 1)
            ),
        )
        return [leaf for leaves in grown for leaf in leaves]

    async def branch(
        self, ctx: AgentContext, state: Any, path: tuple[int, ...], taken: tuple[int, ...], quota: int
    ) -> list[Trajectory]:
        quotas = split(quota, min(self.shape.width, quota))
        children = ctx.fork(len(quotas))
        if not path:
            self.next_first = len(children) if taken[-1] == 0 else 1
        try:
            states = await self.loop.fork_state(state, children)
        except Exception as exc:
            return await self.leaf(ctx, state, path, taken[:-1], quota, exc)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await asyncio.shield(self.loop.fail(ctx, state))
            raise
        try:
            await self.loop.discard(state)
        except Exception:  # the children hold their own state: a parent that frees badly takes nothing down
            logger.exception("freeing the state of forked trajectory %s failed", ctx.trajectory.id)
        self.set_child_sampling(ctx, children)
        grown = await asyncio.gather(
            *(
                self.grow(child, child_state, (*path, i), taken, share)
                for i, (child, child_state, share) in enumerate(zip(children, states, quotas, strict=True))
            )
        )
        return [leaf for leaves in grown for leaf in leaves]

    def set_child_sampling(self, parent: AgentContext, children: list[AgentContext]) -> None:
        """Give each child of `parent`'s fork its sampling (`child_sampling`), all read from `parent` before any is
        set (with `resample_uncertain` the parent's own context may be one of the children)."""
        updates = [self.child_sampling(parent, index) for index in range(len(children))]
        for child, update in zip(children, updates, strict=True):
            child.sampling = child.sampling.model_copy(update=update)

    def child_sampling(self, parent: AgentContext, index: int) -> dict[str, Any]:
        """What child `index` of `parent`'s fork samples with unlike its parent: a seed of its own (when the
        parent's was seeded) and, at a fork after a turn, `child_temperature`."""
        update: dict[str, Any] = {}
        if parent.sampling.seed is not None:
            update["seed"] = child_seed(parent.sampling.seed, index)
        if self.shape.child_temperature is not None and parent.trajectory.num_turns > 0:
            update["temperature"] = self.shape.child_temperature
        return update

    async def leaf(
        self,
        ctx: AgentContext,
        state: Any,
        path: tuple[int, ...],
        taken: tuple[int, ...],
        quota: int,
        exc: Exception | None = None,
    ) -> list[Trajectory]:
        """End the episode of `ctx` as a leaf (with the stop reason or error `exc` gives, if any); with `fill`, the
        rest of its quota goes to new first branches."""
        traj = ctx.trajectory
        if exc is not None:
            _record_stop(traj, exc)
        failed = exc is not None and not isinstance(exc, StopLoop)
        try:
            await (self.loop.fail if failed else self.loop.end)(ctx, state)
        except Exception as error:  # as in a plain run, where `end` raising fails the trajectory
            if exc is None or isinstance(exc, StopLoop):
                _record_stop(traj, error)
        if traj.stop_reason is None:
            traj.stop_reason = StopReason.DONE
        _mark(traj, self.id, path, taken)
        if self.fresh is None or quota == 1 or self.budget.spent:
            return [traj]
        return [traj, *await self.refill(quota - 1)]

    async def refill(self, count: int) -> list[Trajectory]:
        """`count` leaves' worth of new first branches, each started from the prompt as the root was."""
        self.refilled = True
        most = self.shape.capacity((0,))
        shares = [min(most, count - start) for start in range(0, count, most)]
        grown = await asyncio.gather(*(self.first_branch(share) for share in shares))
        return [leaf for leaves in grown for leaf in leaves]

    async def first_branch(self, quota: int) -> list[Trajectory]:
        """One more child of the branch point before the first turn, its state made by `begin` (a fresh start is
        that point's state); a start that fails is a failed leaf, not refilled again."""
        assert self.fresh is not None
        index, self.next_first = self.next_first, self.next_first + 1
        (ctx,) = self.fresh.fork(1)
        if ctx.sampling.seed is not None:
            ctx.sampling = ctx.sampling.model_copy(update={"seed": child_seed(ctx.sampling.seed, index)})
        try:
            state = await self.loop.begin(self.sample, ctx)
        except Exception as exc:
            _record_stop(ctx.trajectory, exc)
            _mark(ctx.trajectory, self.id, (index,), (0,))
            return [ctx.trajectory]
        return await self.grow(ctx, state, (index,), (0,), quota)


def _root_as_first_branch(leaves: list[Trajectory]) -> None:
    """A tree that did not fork before its first turn (`every`, `entropy`) but had first branches added (`fill`):
    its root's episode becomes the first of them, child 0 of a branch point at turn 0 (the others are 1, 2, …)."""
    for leaf in leaves:
        tree = leaf.metadata["tree"]
        if tree["branch_turns"][:1] != [0]:
            tree["path"], tree["branch_turns"] = [0, *tree["path"]], [0, *tree["branch_turns"]]


def split(quota: int, parts: int) -> list[int]:
    """`quota` leaves shared as evenly as can be among `parts` children, the larger shares first."""
    return [quota // parts + (1 if i < quota % parts else 0) for i in range(parts)]


def child_seed(seed: int, index: int) -> int:
    """The sampling seed of child `index` of a node sampled with `seed` (31 bits, far from its siblings')."""
    return derived_seed(seed, "fork", index)


def _mark(traj: Trajectory, tree_id: str, path: tuple[int, ...], branch_turns: Sequence[int]) -> None:
    traj.metadata["tree"] = {"id": tree_id, "path": list(path), "branch_turns": list(branch_turns)}


def _record_stop(traj: Trajectory, exc: Exception) -> None:
    """The stop reason `exc` means (a budget's `StopLoop`, or a failure with its error)."""
    if isinstance(exc, StopLoop):
        traj.stop_reason = exc.reason
    else:
        traj.stop_reason, traj.error = stop_reason_for(exc), f"{type(exc).__name__}: {exc}"
