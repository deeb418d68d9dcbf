"""The fork check of `check_loop`, for a forkable loop (`SteppedLoop`): children given the parent's seeds replay the
parent exactly, and share no state: an object a child's state holds together with its parent's or a sibling's
(found by walking the states) must not change while that other one plays on. Static data shared read-only (a
map's transition table) passes; an environment, a random generator or a conversation shared by mistake does not."""

from __future__ import annotations

import asyncio
import pickle
import threading
import types
from collections import deque
from typing import Any

from agentrl.loops.conformance.play import CheckedLoop, Episode, RecordingPolicy
from agentrl.loops.context import AgentContext, StopLoop
from agentrl.loops.stepped import SteppedLoop
from agentrl.types import StopReason, Trajectory

MAX_OBJECTS = 50_000
"""Objects walked per state, at most (a state that holds a whole library is not walked to its end)."""
_IMMUTABLE = (str, bytes, int, float, complex, bool, type(None), range, frozenset)
_NOT_STATE = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType)
_SHARED_BY_DESIGN = (asyncio.Lock, asyncio.Semaphore, asyncio.Event, asyncio.Condition, type(threading.Lock()))
"""Synchronisation objects: a limit every episode of a run shares (a browser or container pool) is one object."""


async def fork_problems(loop: CheckedLoop, free: Episode) -> list[str]:
    """Play the case's episode to a turn boundary, fork it in two, and play the children to the end one after the
    other: an object two states share must not change while one of them plays on, and each child must end as the
    unforked episode did."""
    if not issubclass(loop.cls, SteppedLoop) or not loop.cls.forkable:
        return []
    at = 1 if free.trajectory.num_turns >= 2 else 0
    async with loop.manager(RecordingPolicy(loop.tokenizer, loop.case)) as manager:
        stepped = manager.loop(loop.name)
        assert isinstance(stepped, SteppedLoop)
        parent = await manager.open_context(loop.sample, Trajectory(group_id="check"))
        opened = [parent]
        try:
            return await _fork_and_replay(stepped, parent, opened, free.trajectory, at)
        except Exception as exc:  # a fork that raises is a broken property too, not a crash of the checker
            return [f"fork: forking after turn {at} raised {type(exc).__name__}: {exc}"]
        finally:
            for ctx in opened:
                await manager.close_context(ctx)


async def _fork_and_replay(
    stepped: SteppedLoop, parent: AgentContext, opened: list[AgentContext], free: Trajectory, at: int
) -> list[str]:
    state = await stepped.begin(parent.sample, parent)
    for _ in range(at):
        await stepped.step(parent, state)
    children = parent.fork(2)
    opened += children
    states = await stepped.fork_state(state, children)
    mutable = not isinstance(state, (*_IMMUTABLE, tuple))  # None, a number: nothing to share
    if mutable and (any(s is state for s in states) or states[0] is states[1]):
        await stepped.discard(state)
        return ["fork: fork_state gave a child its parent's or its sibling's own state object: make one per child"]
    shared = shared_objects(state, states, allowed=_design_shared(stepped, parent))
    before = [_fingerprint(obj) for _, obj, _ in shared]
    await _finish(stepped, children[0], states[0])
    problems = [
        f"fork: a child's state{path} ({type(obj).__name__}) is the same object as {who} and changed while "
        "a sibling played on: copy it in fork_state (copy.deepcopy, or a fresh one per child)"
        for (path, obj, who), fingerprint in zip(shared, before, strict=True)
        if _fingerprint(obj) != fingerprint
    ]
    await stepped.discard(state)
    await _finish(stepped, children[1], states[1])
    return problems + _replay_problems(free, [c.trajectory for c in children], at)


def shared_objects(parent: Any, children: list[Any], allowed: set[int]) -> list[tuple[str, Any, str]]:
    """`(path, object, whose)` of each mutable object that a child's state shares with its parent's or a sibling's
    (the outermost such object of each path, found from the children's side)."""
    owners: dict[int, int] = {}
    for index, state in enumerate([parent, *children]):
        for _, obj in _mutable_objects(state, allowed):
            owners.setdefault(id(obj), index)
    found: list[tuple[str, Any, str]] = []
    for index, state in enumerate(children, start=1):
        for path, obj in _mutable_objects(state, allowed):
            owner = owners[id(obj)]
            if owner != index and not any(path.startswith(p) for p, _, _ in found):
                found.append((path, obj, "the parent's" if owner == 0 else "a sibling's"))
    return found


def _fingerprint(obj: Any) -> bytes | str:
    """What `obj` holds, to tell whether it changed: its pickle, or its repr when it has none (a handle, a lock;
    a repr rarely shows a change, so such an object's changes mostly go unseen)."""
    try:
        return pickle.dumps(obj)
    except Exception:
        return repr(obj)


def _mutable_objects(root: Any, allowed: set[int]) -> list[tuple[str, Any]]:
    """(path, object) of every mutable object reachable from `root`, breadth first, each once (tuples are walked
    into, not listed)."""
    out, seen, queue = [], {id(root)}, deque([("", root)])
    while queue and len(seen) < MAX_OBJECTS:
        path, obj = queue.popleft()
        if path and not isinstance(obj, tuple):
            out.append((path, obj))
        for key, value in _members(obj):
            if id(value) in seen or id(value) in allowed or _skipped(value):
                continue
            seen.add(id(value))
            queue.append((f"{path}{key}", value))
    return out


def _members(obj: Any) -> list[tuple[str, Any]]:
    if isinstance(obj, dict):
        return [(f"[{k!r}]", v) for k, v in obj.items()]
    if isinstance(obj, list | tuple | set | frozenset):
        return [(f"[{i}]", v) for i, v in enumerate(obj)]
    members = dict(vars(obj)) if hasattr(obj, "__dict__") else {}
    for name in getattr(type(obj), "__slots__", ()):
        if hasattr(obj, name):
            members[name] = getattr(obj, name)
    return [(f".{k}", v) for k, v in members.items()]


def _skipped(value: Any) -> bool:
    return isinstance(value, _IMMUTABLE + _NOT_STATE + _SHARED_BY_DESIGN) or (isinstance(value, tuple) and not value)


def _design_shared(loop: SteppedLoop, ctx: AgentContext) -> set[int]:
    """Objects every episode shares by design: the loop and its config, and the context's model, tokenizer,
    sample, sampling and budgets (`AgentContext.fork` shares them)."""
    roots = [loop, ctx.llm, ctx.tokenizer, ctx.sample, ctx.sampling, ctx.budgets]
    allowed = {id(r) for r in roots}
    for root in (loop, ctx.sample, ctx.sampling, ctx.budgets):
        allowed |= {id(obj) for _, obj in _mutable_objects(root, allowed)}
    return allowed


async def _finish(loop: SteppedLoop, ctx: AgentContext, state: Any) -> None:
    """Play a forked episode to its end, as `SteppedLoop.run` and the runner would."""
    try:
        while not await loop.step(ctx, state):
            pass
    except StopLoop as stop:
        ctx.trajectory.stop_reason = stop.reason
    except BaseException:
        await loop.fail(ctx, state)
        raise
    await loop.end(ctx, state)
    if ctx.trajectory.stop_reason is None:
        ctx.trajectory.stop_reason = StopReason.DONE


def _replay_problems(free: Trajectory, children: list[Trajectory], at: int) -> list[str]:
    problems = []
    for child in children:
        differs = [name for name, same in _compare(free, child).items() if not same]
        if differs:
            problems.append(
                f"fork: a child forked after turn {at} ended unlike the unforked episode ({', '.join(differs)}): "
                "fork_state must copy everything the episode goes on from (its environment, random generators, "
                "sandbox files)"
            )
    return problems[:1]


def _compare(a: Trajectory, b: Trajectory) -> dict[str, bool]:
    return {
        "tokens": [s.token_ids for s in a.step_samples()] == [s.token_ids for s in b.step_samples()],
        "reward": a.reward == b.reward and a.player_rewards == b.player_rewards,
        "turn rewards": a.turn_rewards == b.turn_rewards,
        "stop reason": a.stop_reason == b.stop_reason,
    }


__all__ = ["fork_problems", "shared_objects"]
