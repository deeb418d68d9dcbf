"""`LoopCheckCase`: what `check_loop` plays for a loop, declared by the loop class (`AgentLoopBase.check_case`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentrl.types import Message, Sample

Reply = str | Callable[[str], str]
"""A scripted reply: fixed text, or a function of the decoded conversation so far (its last turn's prompt)."""

NEEDS = frozenset({"docker", "browser", "server"})
"""What an episode may need beyond this process: a Docker engine and images, a browser, or a server of its own."""


def _hello() -> Sample:
    return Sample(prompt=[Message(role="user", content="Say hello.")], id="check")


@dataclass(frozen=True)
class LoopCheckCase:
    """One episode `check_loop` plays against a scripted policy (the model's tokenizer, no rollout server).

    Attributes:
        config: the run's settings for the episode, as a nested dict over `AgentRLConfig` (e.g.
            `{"agent": {"kwargs": {...}}, "tools": [...], "env": {...}}`); `agent.name` is the checked loop's.
        sample: the dataset row played.
        reply: what the scripted policy answers each turn. The checks replay episodes, so a callable must be a
            pure function of the conversation it is given.
        needs: what the episode needs beyond this process (`NEEDS`): a loop that needs any is checked where it
            runs (agentrl's integration tier), not in the seconds-long unit tier.
        min_turns: turns the episode plays with no budget in the way (the budget and fork checks cut it shorter).
        lacks: what the episode lacks that only a run's recipe gives (a task, its tools, an environment), in words,
            or None when the case plays as it is. `agentrl check` then exits 2 asking for `recipe=` (the loop's
            recipe in `CHECK_RECIPES`) instead of playing an episode that cannot be played; the recipe's run and
            task are played through the loop's `recipe_check_case`.
    """

    config: dict[str, Any] = field(default_factory=dict)
    sample: Sample = field(default_factory=_hello)
    reply: Reply = "Hello."
    needs: frozenset[str] = frozenset()
    min_turns: int = 1
    lacks: str | None = None

    def __post_init__(self) -> None:
        if unknown := set(self.needs) - NEEDS:
            raise ValueError(f"LoopCheckCase.needs: unknown {sorted(unknown)}; known: {sorted(NEEDS)}")


__all__ = ["NEEDS", "LoopCheckCase", "Reply"]
