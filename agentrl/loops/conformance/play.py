"""Playing a loop's check episode against a scripted policy that records what it generated.

The episode runs as in a real run: the loop is built from the run's config, and the episode goes through a
`RolloutManager` of `local_rollout_session` (its tools and sandbox attached), so what the checks see is what
training would see. Only the policy is scripted (`RecordingPolicy`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from agentrl.config.schema import AgentRLConfig
from agentrl.loops.base import AgentLoopBase
from agentrl.loops.conformance.case import LoopCheckCase
from agentrl.loops.conformance.policy import RecordingPolicy
from agentrl.loops.context import AgentContext
from agentrl.loops.local_session import local_rollout_session
from agentrl.loops.manager import RolloutManager
from agentrl.types import Sample, Trajectory

TEMPERATURE = 0.7
"""The sampling temperature of the check's episodes (not 1.0, so that a loop that drops it is caught)."""


@dataclass
class Episode:
    """A played episode: its trajectory, the policy's replies, and the tool schemas the model was offered."""

    trajectory: Trajectory
    policy: RecordingPolicy
    tools: list[dict[str, Any]] | None = None
    contexts: list[AgentContext] = field(default_factory=list)


class CheckedLoop:
    """The loop under check: its class, the case it declared and the tokenizer, and ways to play episodes."""

    def __init__(self, loop: type[AgentLoopBase], name: str, case: LoopCheckCase, tokenizer: Any):
        self.cls, self.name, self.case, self.tokenizer = loop, name, case, tokenizer

    @property
    def sample(self) -> Sample:
        """The case's sample, played by the checked loop whatever loop the row names (`agent_name`)."""
        return self.case.sample.model_copy(update={"agent_name": None})

    def config(self, **agent: Any) -> AgentRLConfig:
        """The run's config for the check's episodes (`agent` overrides `agent:` settings such as budgets)."""
        defaults = {
            "agent": {"max_turns": 8, "max_total_tokens": 4096},
            "rollout": {"max_tokens": 24, "max_model_len": 4096},
        }
        # the check's own settings win over the case's (a recipe's config, say): one episode, sampled at TEMPERATURE,
        # whose generations a weight push's abort resumes (RecordingPolicy(abort=True) aborts one)
        rollout = {"temperature": TEMPERATURE, "n": 1, "workers": 0, "weight_update": "resume"}
        checked = {"agent": {"name": self.name, **agent}, "rollout": rollout}
        return AgentRLConfig.model_validate(merged(merged(defaults, self.case.config), checked))

    @contextlib.asynccontextmanager
    async def manager(self, policy: RecordingPolicy, **agent: Any) -> AsyncIterator[RolloutManager]:
        """A rollout manager for the check's config, with this loop (built as a run builds it) under its name."""
        cfg = self.config(**agent)
        async with local_rollout_session(cfg, policy, self.tokenizer) as manager:
            manager.use_loop(self.name, self.cls(cfg.agent))  # also when the class is registered under no name
            yield manager

    async def play(
        self, delay_s: float = 0.0, fail_with: Exception | None = None, abort: bool = False, **agent: Any
    ) -> Episode:
        """Play the case's episode to its end (loop failures end up on the trajectory, as in a run); `abort`: the
        policy aborts one reply part-way (`RecordingPolicy`)."""
        policy = RecordingPolicy(self.tokenizer, self.case, delay_s=delay_s, fail_with=fail_with, abort=abort)
        async with self.manager(policy, **agent) as manager:
            contexts = _record_contexts(manager)
            traj = await manager.run_one(self.sample, group_id="check")
        tools = contexts[0].tool_schemas if contexts else None
        return Episode(traj, policy, tools, contexts)


def _record_contexts(manager: RolloutManager) -> list[AgentContext]:
    """The contexts the manager builds from now on (after its own setup hook ran on each)."""
    seen: list[AgentContext] = []
    manager.setup_context = recording_contexts(manager.setup_context, seen)
    return seen


def recording_contexts(setup: Callable[[AgentContext], Any] | None, seen: list[AgentContext]) -> Callable:
    """A setup hook that runs `setup` (a manager's own, sync or async) on each context, then keeps it in `seen`."""

    async def record(ctx: AgentContext) -> None:
        if setup is not None:
            result = setup(ctx)
            if asyncio.iscoroutine(result):
                await result
        seen.append(ctx)

    return record


def merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over`'s settings over `base`'s, nested dicts merged key by key."""
    out = dict(base)
    for key, value in over.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


__all__ = ["TEMPERATURE", "CheckedLoop", "Episode", "RecordingPolicy", "merged", "recording_contexts"]
