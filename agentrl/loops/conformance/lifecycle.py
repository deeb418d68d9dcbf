"""The lifecycle checks of `check_loop`: a failure is a failed trajectory, budgets end with their stop reason,
and a cancelled episode leaves no task, process or sandbox behind."""

from __future__ import annotations

import asyncio
import contextlib
import os

from agentrl.loops.conformance.play import CheckedLoop, Episode, RecordingPolicy, recording_contexts
from agentrl.loops.context import AgentContext
from agentrl.types import StopReason, Trajectory

SCRIPTED_FAILURE = "check_loop's scripted policy failed on purpose"
CANCEL_WAIT_S = 10.0
"""How long the cancellation check waits for the episode to reach its first call of the policy."""
STOP_WAIT_S = 30.0
"""How long a cancelled episode may take to stop (it frees its sandbox, its browser)."""


async def failure_problems(loop: CheckedLoop, free: Episode) -> list[str]:
    """A policy call that raises ends the trajectory as a failure (`Trajectory.failed`), which is never trained."""
    if not free.policy.generated:  # the episode never asks the policy (a reference solution): nothing can raise
        return []
    episode = await loop.play(fail_with=RuntimeError(SCRIPTED_FAILURE))
    traj = episode.trajectory
    if traj.failed:
        return []
    return [
        f"failure: a policy call that raised ended the trajectory as {traj.stop_reason} with reward {traj.reward}, "
        "not as a failure, so it would be trained on: let the exception propagate (the runner records it as "
        "error), or end the trajectory with a failure's stop reason"
    ]


async def budget_problems(loop: CheckedLoop, free: Episode) -> list[str]:
    """`agent.max_turns` and `agent.max_total_tokens` end an episode that would go on, with their stop reasons."""
    problems = []
    if free.trajectory.num_turns > 1:
        cut = (await loop.play(max_turns=1)).trajectory
        if cut.stop_reason != StopReason.MAX_TURNS or cut.num_turns > 1:
            problems.append(
                f"budgets: with agent.max_turns=1 an episode that plays {free.trajectory.num_turns} turns ended as "
                f"{cut.stop_reason} after {cut.num_turns}: generate turns with ctx.generate, which raises "
                "StopLoop(max_turns), and let it propagate"
            )
    if not free.policy.generated:  # the episode never asks the policy (a reference solution): no budget to reach
        return problems
    room = max(1, min(len(r.token_ids) for r in free.policy.generated) - 1)  # less than its shortest reply needs
    limit = _prompt_tokens(free.trajectory) + room
    cut = (await loop.play(max_total_tokens=limit)).trajectory
    longest = max((s.num_tokens for s in cut.step_samples()), default=0)
    if cut.stop_reason != StopReason.CONTEXT_OVERFLOW or longest > limit:
        problems.append(
            f"budgets: with agent.max_total_tokens={limit} (the prompt and {room} tokens) the episode ended as "
            f"{cut.stop_reason} with a step sample of {longest} tokens, not as context_overflow within the budget: "
            "let ctx.generate size each turn to the room left and raise StopLoop(context_overflow)"
        )
    return problems


async def cancellation_problems(loop: CheckedLoop) -> list[str]:
    """An episode cancelled while it waits on the policy stops, and leaves no task, child process or open
    sandbox."""
    policy = RecordingPolicy(loop.tokenizer, loop.case, delay_s=60.0)
    contexts: list[AgentContext] = []
    async with loop.manager(policy) as manager:
        tasks_before, children_before = _other_tasks(), _child_processes()
        manager.setup_context = recording_contexts(manager.setup_context, contexts)
        episode = asyncio.create_task(manager.run_one(loop.sample, group_id="check"))
        waiting = asyncio.create_task(policy.started.wait())
        await asyncio.wait([episode, waiting], timeout=CANCEL_WAIT_S, return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        episode.cancel()
        done, _ = await asyncio.wait([episode], timeout=STOP_WAIT_S)
        if not done:
            return [
                f"cancellation: the cancelled episode did not stop within {STOP_WAIT_S:g} s: let CancelledError "
                "propagate (never swallow or shield it) and free what the episode holds in a finally block"
            ]
        await asyncio.sleep(0.2)  # a task the loop started and cancelled gets to finish
        return _leftovers(tasks_before, children_before, contexts)


def _leftovers(tasks_before: set[asyncio.Task], children_before: set[int], contexts: list[AgentContext]) -> list[str]:
    problems = []
    if tasks := _other_tasks() - tasks_before:
        names = ", ".join(sorted(t.get_coro().__qualname__ for t in tasks))  # type: ignore[union-attr]
        problems.append(f"cancellation: {len(tasks)} asyncio tasks outlived the cancelled episode ({names})")
    if children := _child_processes() - children_before:
        problems.append(f"cancellation: {len(children)} child processes outlived the cancelled episode")
    for ctx in contexts:
        if ctx.sandbox is not None and not getattr(ctx.sandbox, "closed", True):
            problems.append("cancellation: the cancelled episode's sandbox is still open")
    return [f"{p}: free what the episode started in a finally block (SteppedLoop.fail does)" for p in problems]


def _other_tasks() -> set[asyncio.Task]:
    current = asyncio.current_task()
    return {t for t in asyncio.all_tasks() if t is not current and not t.done()}


def _child_processes() -> set[int]:
    """The pids of this process's children (Linux's /proc; empty elsewhere)."""
    path = f"/proc/{os.getpid()}/task"
    children: set[int] = set()
    with contextlib.suppress(OSError):
        for thread in os.listdir(path):
            with open(f"{path}/{thread}/children") as f:
                children |= {int(pid) for pid in f.read().split()}
    return children


def _prompt_tokens(traj: Trajectory) -> int:
    """The shortest prompt (tokens before the first generated one) of the episode's step samples: a budget of it
    and 2 tokens leaves too little room for any of its turns."""
    prompts = []
    for step in traj.step_samples() or [traj]:
        count = 0
        for seg in step.segments:
            if seg.trainable:
                break
            count += len(seg.token_ids)
        prompts.append(count)
    return min(prompts)


__all__ = ["budget_problems", "cancellation_problems", "failure_problems"]
