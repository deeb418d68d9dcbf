"""`Interaction`: the other side of a multi-turn dialogue (a user simulator, a tutor, a game master)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from agentrl.types import Message, Sample


class Interaction(ABC):
    """Produces the next user turn after an assistant turn that called no tool.

    Return the user's reply, or None to end the dialogue (stop_reason done). Keep per-dialogue state in
    `state`, a dict private to one trajectory.
    """

    def __init__(self, **config: Any):
        self.config = config

    @abstractmethod
    async def respond(self, messages: list[Message], sample: Sample, state: dict[str, Any]) -> str | None:
        """The next user message, or None to finish."""
