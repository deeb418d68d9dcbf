"""The reward contract: a component scores a finished trajectory and explains its score.

A component is anything the pipeline can await per trajectory: a `RewardComponent` subclass (which may also
score a whole batch at once, as model-based scorers do), a plain function `fn(inp, **kwargs)` returning a
`RewardResult` or a number (sync or async), or a verl-style `compute_score(data_source, solution_str,
ground_truth, extra_info)`. See `agentrl.rewards.registry` for how YAML names resolve to components.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from agentrl.errors import UserError
from agentrl.types import Message, Sample, Trajectory


@dataclass
class RewardResult:
    """A component's score and the details behind it (shown in the viewer, logged as reward/<name>)."""

    score: float
    details: dict[str, Any] = field(default_factory=dict)


class RewardError(Exception):
    """A component could not score (judge unreachable, no sandbox, ...); `details` are kept in the record.

    The pipeline applies its failure policy (`zero` or `skip`) to it like to any other exception.
    """

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.details = details or {}


def final_answer(trajectory: Trajectory, sample: Sample | None = None) -> str:
    """The model's answer: the content of the last assistant message (tool output never mixed in); given the
    sample, only a message after its prompt counts (a worked example's answer is not the model's)."""
    messages = after_prompt(trajectory, sample) if sample is not None else trajectory.messages
    for message in reversed(messages):
        if message.role == "assistant":
            return message_text(message)
    return ""


def after_prompt(trajectory: Trajectory, sample: Sample) -> list[Message]:
    """The trajectory's messages after the sample's prompt: what the agent did and what its tools returned (all of
    them when the prompt is not found at the start, as in a loop that builds its own conversation)."""
    messages, prompt = trajectory.messages, sample.prompt
    if not prompt:
        return list(messages)
    last = prompt[-1]
    # the loop may put a system prompt (or other setup) before the sample's prompt, so search a little further
    for i in range(min(len(messages), len(prompt) + 2)):
        same = messages[i].role == last.role and message_text(messages[i]) == message_text(last)
        if same and i + 1 >= len(prompt):
            return list(messages[i + 1 :])
    return list(messages)


def message_text(message: Message) -> str:
    """The text of a message (text parts of multimodal content joined)."""
    if isinstance(message.content, str):
        return message.content
    if isinstance(message.content, list):
        return "".join(str(p.get("text", "")) for p in message.content if isinstance(p, dict))
    return ""


@dataclass
class RewardInput:
    """What a component sees: the trajectory, its sample (ground truth, data source), the final answer and,
    when the rollout leased one, the trajectory's sandbox (still alive while rewards run)."""

    trajectory: Trajectory
    sample: Sample
    answer: str
    sandbox: Any = None

    @property
    def ground_truth(self) -> Any:
        """The sample's reference answer (may be None)."""
        return self.sample.ground_truth

    @property
    def prompt_messages(self) -> list[Message]:
        """The conversation the model was given (the sample's prompt)."""
        return list(self.sample.prompt)

    @property
    def agent_messages(self) -> list[Message]:
        """The trajectory's messages after the prompt: what the agent did and what its tools returned.

        A prompt can hold worked examples with tool calls and results of their own; those are not the agent's.
        """
        return after_prompt(self.trajectory, self.sample)

    @property
    def question(self) -> str:
        """The prompt as plain text: its user messages joined (all messages when it has no user message)."""
        users = [message_text(m) for m in self.sample.prompt if m.role == "user"]
        texts = users or [message_text(m) for m in self.sample.prompt]
        return "\n\n".join(t for t in texts if t)


class RewardComponent:
    """Base class of stateful components (models, judges). Subclasses implement `ascore` and may override
    `ascore_batch` to score many inputs in one call (the pipeline prefers it when `batched` is True).

    Constructor keyword arguments come from the component's YAML entry.
    """

    batched: bool = False
    """True when `ascore_batch` does real batching; then the pipeline hands it every input of a batch at once."""

    async def ascore(self, inp: RewardInput) -> RewardResult:
        """Score one trajectory; raise `RewardError` (or anything) when it cannot."""
        results = await self.ascore_batch([inp])
        return results[0]

    async def ascore_batch(self, inps: list[RewardInput]) -> list[RewardResult]:
        """Score many trajectories; the default awaits `ascore` for each, concurrently."""
        if type(self).ascore is RewardComponent.ascore:
            raise NotImplementedError(f"{type(self).__name__} must implement ascore or ascore_batch")
        return list(await asyncio.gather(*(self.ascore(i) for i in inps)))

    async def aclose(self) -> None:
        """Free held resources (HTTP clients, models); the default does nothing."""


def as_result(value: Any, where: str) -> RewardResult:
    """Coerce what a component returned into a `RewardResult`.

    Accepts a `RewardResult`, a number or bool, or a dict with a `score` key (verl style: the other keys
    become details).
    """
    if isinstance(value, RewardResult):
        return value
    if isinstance(value, bool | int | float):
        return RewardResult(float(value))
    if isinstance(value, dict) and "score" in value:
        details = {k: v for k, v in value.items() if k != "score"}
        return RewardResult(float(value["score"]), details)
    raise UserError(
        f"reward component {where} returned {type(value).__name__}; return a RewardResult, a number or a dict "
        "with a 'score' key"
    )
