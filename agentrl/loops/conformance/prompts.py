"""The context check of `check_loop`: each reply was generated from exactly the tokens before it in its step sample
(a reply that opens a step sample: from its prompt; a piece of a resumed reply: from those and the pieces before
it). Otherwise the trainer scores the reply's logprobs under a context the model never sampled it from."""

from __future__ import annotations

from typing import Any

from agentrl.loops.conformance.play import Episode
from agentrl.loops.conformance.policy import Generated
from agentrl.types import Trajectory

SHOWN = 60
"""Characters of each side of a difference shown in a problem."""


def context_problems(episode: Episode, tokenizer: Any) -> list[str]:
    """Every generated token of a step sample follows exactly the context it was sampled in: the prompt of its
    generation and that generation's tokens before it."""
    generated = episode.policy.generated
    wrong: dict[int, tuple[int, list[int], list[int]]] = {}  # generation -> (step sample, its context, tokens held)
    for index, step in enumerate(episode.trajectory.step_samples()):
        for gen, context, held in _contexts(step, generated):
            if context != held:
                wrong.setdefault(gen, (index, context, held))
    if not wrong:
        return []
    index, context, held = next(iter(wrong.values()))
    at = next((i for i, (a, b) in enumerate(zip(context, held, strict=False)) if a != b), min(len(context), len(held)))
    saw, holds = (tokenizer.decode(ids[at:], skip_special_tokens=False)[:SHOWN] for ids in (context, held))
    return [
        f"context: {len(wrong)} of the policy's {len(generated)} generations were not generated from the tokens "
        f"before them in their step sample (the first, in step sample {index}: from token {at} on, of the "
        f"{len(context)} it was generated from and the {len(held)} before it, the policy saw {saw!r} where the step "
        f"sample holds {holds!r}), so they would be trained under a context they were not sampled in: generate "
        "each reply with ctx.generate from the conversation as recorded, and put whatever the model is shown (a "
        "hint, a trimmed history) into the step sample (ctx.add_messages, or ctx.new_step_sample for a new context)"
    ]


def _contexts(step: Trajectory, generated: list[Generated]) -> list[tuple[int, list[int], list[int]]]:
    """`(generation, context it was sampled in, tokens before it in `step`)` for each run of `step`'s tokens that one
    generation produced in order (a token followed by its generation's next one is in its context exactly when the
    token before it is). Tokens no generation produced are left to the tokens check."""
    origin = {lp: (g, j) for g, gen in enumerate(generated) for j, lp in enumerate(gen.logprobs)}
    tokens = step.token_ids
    runs: list[tuple[int, list[int], list[int]]] = []
    position, previous = 0, None
    for seg in step.segments:
        logprobs: list[float | None] = [*seg.logprobs] if seg.logprobs else [None] * len(seg.token_ids)
        for token, logprob in zip(seg.token_ids, logprobs, strict=True):
            here = origin.get(logprob) if logprob is not None else None
            if here is not None and generated[here[0]].token_ids[here[1]] != token:
                here = None
            if here is not None and previous != (here[0], here[1] - 1):
                gen = generated[here[0]]
                runs.append((here[0], gen.prompt + gen.token_ids[: here[1]], tokens[:position]))
            previous = here
            position += 1
    return runs


__all__ = ["context_problems"]
