"""One turn's generation, continued from its exact prefix after each abort by a weight push (partial rollouts):
the loop of `AgentContext.generate` and of the gateway's sessions."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from agentrl.loops.protocols import Generation, Piece, pieces_of
from agentrl.rollout.protocol import SamplingParams

MAX_RESUMES = 16
"""Continuations of one generation after aborts, at most (weight pushes faster than a turn would never end)."""


@dataclass
class Resumed:
    """A generation in pieces, each with the version that generated it, and how it ended."""

    pieces: list[Piece]
    finish_reason: str | None
    """The last output's, or `length` when the aborts ate the turn's whole token budget."""
    last: Generation


async def generate_resuming(
    generate_once: Callable[[list[int], SamplingParams], Awaitable[Generation]],
    prompt: list[int],
    sampling: SamplingParams,
    resume: bool,
    metrics: dict[str, float],
) -> Resumed:
    """Generate from `prompt`; with `resume`, continue after each abort from the exact prefix (the prompt plus the
    pieces so far) with the tokens left, at most `MAX_RESUMES` times, counting `rollout/resumed_generations`."""
    pieces: list[Piece] = []
    generated: list[int] = []
    while True:
        left = sampling.model_copy(update={"max_tokens": sampling.max_tokens - len(generated)})
        out = await generate_once(prompt + generated, left)
        pieces.extend(pieces_of(out))
        generated += list(out.token_ids)
        if out.finish_reason != "abort" or not resume or len(pieces) > MAX_RESUMES:
            return Resumed(pieces, out.finish_reason, out)
        if len(generated) >= sampling.max_tokens:  # aborted exactly at the limit: the turn is cut there
            return Resumed(pieces, "length", out)
        metrics["rollout/resumed_generations"] = metrics.get("rollout/resumed_generations", 0.0) + 1.0
