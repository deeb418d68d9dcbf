"""The reward contract: a component scores a finished trajectory and explains its score."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentrl.types import Sample, Trajectory


@dataclass
class RewardResult:
    """A component's score and the details behind it (shown in the viewer, logged as reward/<name>)."""

    score: float
    details: dict[str, Any] = field(default_factory=dict)


def final_answer(trajectory: Trajectory) -> str:
    """The model's answer: the content of the last assistant message (tool output never mixed in)."""
    for message in reversed(trajectory.messages):
        if message.role == "assistant":
            return message.content if isinstance(message.content, str) else ""
    return ""


@dataclass
class RewardInput:
    """What a component sees."""

    trajectory: Trajectory
    sample: Sample
    answer: str
    sandbox: Any = None
