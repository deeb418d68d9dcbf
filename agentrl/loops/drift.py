"""Drift checker: does re-rendering the conversation reproduce the trajectory's tokens?

Training on a trajectory whose tokens differ from what the chat template would produce for its messages means
training on a context the model never sees at inference. The checker re-renders all messages with the template
and reports the first position where the tokens differ.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentrl.loops.chat_template import encode, render
from agentrl.types import Trajectory


@dataclass
class DriftReport:
    """Result of a drift check.

    Attributes:
        ok: True when the trajectory's tokens are a prefix of the re-rendered conversation.
        position: index of the first differing token (None when ok).
        kind: "" when ok; "tokenization" when the model produced a different tokenization of the same text
            (benign for training); "template" when the texts differ too.
        expected: re-rendered text around the difference.
        actual: trajectory text around the difference.
    """

    ok: bool
    position: int | None = None
    kind: str = ""
    expected: str = ""
    actual: str = ""

    def __str__(self) -> str:
        if self.ok:
            return "no drift"
        return f"{self.kind} drift at token {self.position}: expected {self.expected!r}, got {self.actual!r}"


def check_drift(tokenizer: Any, trajectory: Trajectory, tools: list[dict[str, Any]] | None = None) -> DriftReport:
    """Compare a trajectory's tokens with a fresh rendering of its messages.

    A trajectory that ends right after an assistant's end-of-turn token may lack the template's trailing text
    after it; the comparison therefore only requires the trajectory to be a prefix of the rendering.
    """
    ends_with_assistant = bool(trajectory.messages) and trajectory.messages[-1].role == "assistant"
    text = render(tokenizer, trajectory.messages, add_generation_prompt=not ends_with_assistant, tools=tools)
    expected = encode(tokenizer, text)
    actual = trajectory.token_ids
    position = _first_difference(expected, actual)
    if position is None:
        return DriftReport(ok=True)
    same_text = tokenizer.decode(expected).startswith(tokenizer.decode(actual))
    return DriftReport(
        ok=False,
        position=position,
        kind="tokenization" if same_text else "template",
        expected=tokenizer.decode(expected[max(0, position - 8) : position + 8]),
        actual=tokenizer.decode(actual[max(0, position - 8) : position + 8]),
    )


def _first_difference(expected: list[int], actual: list[int]) -> int | None:
    for i, (e, a) in enumerate(zip(expected, actual, strict=False)):
        if e != a:
            return i
    if len(actual) > len(expected):
        return len(expected)
    return None
