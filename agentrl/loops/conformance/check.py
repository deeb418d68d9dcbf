"""`check_loop`: the contract every agent loop keeps, checked the same way for each (after Gymnasium's `check_env`).

It plays the loop's check episode (`AgentLoopBase.check_case`) against a scripted policy and checks, each property
by a small check of its own that names what to change:
- tokens: generated tokens appended verbatim, with their own logprobs, trained once;
- context: each reply was generated from exactly the tokens before it in its step sample;
- drift: each step sample re-renders from its messages exactly;
- attribution: every generated token carries its logprob, version, temperature and (several roles) its role; the
  policy reports a new version for every generation and aborts one reply part-way, so that a loop that resumes it
  (`rollout.weight_update=resume`) records two pieces, each with its own version;
- reward: the reward that reaches each trainable token is its own role's (self-play included);
- failure: an exception is a failed trajectory, never trained on;
- budgets: `max_turns` and the token budget end an episode with their stop reasons;
- fork: a forkable loop's children replay the parent exactly and share no state;
- cancellation: a cancelled episode leaves no task, process or sandbox behind.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from agentrl.errors import UserError
from agentrl.loops.base import AgentLoopBase, get_loop_class
from agentrl.loops.conformance.case import LoopCheckCase
from agentrl.loops.conformance.forks import fork_problems
from agentrl.loops.conformance.lifecycle import budget_problems, cancellation_problems, failure_problems
from agentrl.loops.conformance.play import CheckedLoop, merged
from agentrl.loops.conformance.prompts import context_problems
from agentrl.loops.conformance.rewards import reward_problems
from agentrl.loops.conformance.tokens import attribution_problems, drift_problems, verbatim_problems


class LoopContractError(AssertionError):
    """A loop broke the loop contract: `problems` lists each broken property with what to change."""

    def __init__(self, loop: str, problems: list[str]):
        self.loop, self.problems = loop, problems
        super().__init__(f"the loop {loop} breaks the loop contract:\n  " + "\n  ".join(problems))


def check_loop(
    loop: str | type[AgentLoopBase],
    tokenizer: Any = None,
    case: LoopCheckCase | None = None,
    config: dict[str, Any] | None = None,
) -> None:
    """Check that `loop` keeps the loop contract (see the module docstring).

    Args:
        loop: a registered loop name, a `module:Class` path, or an `AgentLoopBase` subclass.
        tokenizer: the tokenizer to play with; default: the default model's (`agentrl model prepare`).
        case: what to play instead of the loop's own `check_case()` (a recipe's config, a task's sample and
            replies: how a loop that needs a container, a browser or a server of the caller's is checked).
        config: settings over the case's config (nested, as in a recipe's YAML; `agentrl check` passes its
            `key=value` settings here).

    It runs its own event loop (`asyncio.run`): call it outside one (from a notebook, `await asyncio.to_thread(
    check_loop, ...)`).

    Raises:
        LoopContractError: listing every broken property, each with what to change.
        UserError: `loop` names no loop class.
    """
    name, problems = loop_problems(loop, tokenizer, case, config)
    if problems:
        raise LoopContractError(name, problems)


def loop_problems(
    loop: str | type[AgentLoopBase],
    tokenizer: Any = None,
    case: LoopCheckCase | None = None,
    config: dict[str, Any] | None = None,
) -> tuple[str, list[str]]:
    """`(name, problems)`: the loop's name as checked and every broken property (empty: the contract holds)."""
    cls, name = _resolve(loop)
    if tokenizer is None:
        from agentrl.models import load_tokenizer, resolve_model

        tokenizer = load_tokenizer(resolve_model("default"))
    case = case or cls.check_case()
    case = replace(case, config=merged(case.config, config or {}))
    return name, asyncio.run(_problems(CheckedLoop(cls, name, case, tokenizer)))


async def _problems(loop: CheckedLoop) -> list[str]:
    free = await loop.play(abort=True)
    if free.policy.aborted and not free.policy.resumed:  # a loop that does not resume: checked without the abort
        free = await loop.play()
    if free.trajectory.failed:
        return [
            f"play: the check episode failed ({free.trajectory.stop_reason}: {free.trajectory.error}); fix the loop, "
            "or what check_loop plays (its check_case, or the case and config passed to check_loop)"
        ]
    if (turns := free.trajectory.num_turns_in_all_steps()) < loop.case.min_turns:
        return [
            f"play: the check episode played {turns} turns, fewer than its case's min_turns={loop.case.min_turns}, "
            "so the budget and fork checks would test less than the case means: fix the loop or its case's replies"
        ]
    problems = [
        *verbatim_problems(free),
        *context_problems(free, loop.tokenizer),
        *drift_problems(free, loop.tokenizer),
        *attribution_problems(free, loop.cls.roles),
        *reward_problems(free),
    ]
    problems += await failure_problems(loop, free)
    problems += await budget_problems(loop, free)
    problems += await fork_problems(loop, free)
    problems += await cancellation_problems(loop)
    return problems


def _resolve(loop: str | type[AgentLoopBase]) -> tuple[type[AgentLoopBase], str]:
    if isinstance(loop, str):
        return get_loop_class(loop), loop
    if not (isinstance(loop, type) and issubclass(loop, AgentLoopBase)):
        raise UserError(f"check_loop takes a loop name, a module:Class path or an AgentLoopBase subclass, not {loop!r}")
    return loop, f"{loop.__module__}:{loop.__qualname__}"


__all__ = ["LoopContractError", "check_loop", "loop_problems"]
