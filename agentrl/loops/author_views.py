"""One author's view of an episode: its turns, and only its generated tokens trainable.

An episode holds every author's turns as they happened: each policy's (`Segment.policy`), each role's
(`Segment.player`). An author trains on a view of it: the same token sequences, in which only that author's
generated segments stay trainable (the others' turns are context it saw, like a tool result), with the per-turn
rewards and states of its own turns. `agentrl.loops.player_views` makes one per role, and
`agentrl.trainer.policy_batches` one per policy.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from agentrl.types import Segment, Trajectory

T = TypeVar("T")
Author = Callable[[Segment], Hashable]
"""Who generated a segment: its policy, its role."""


def turn_authors(traj: Trajectory, author_of: Author) -> list[Any]:
    """The author of each generated turn, over all step samples in `step_samples()` order (as `turn_rewards`)."""
    out = []
    for step in traj.step_samples():
        firsts: dict[int, Segment] = {}
        for i, seg in zip(step.turn_index(), step.segments, strict=True):
            if i is not None:
                firsts.setdefault(i, seg)
        out += [author_of(firsts[i]) for i in sorted(firsts)]
    return out


def author_view(
    traj: Trajectory, author_of: Author, author: Hashable, update: dict[str, Any], turns: list[Any] | None = None
) -> Trajectory:
    """`traj` as `author` trains on it: only its own generated tokens trainable, the turn rewards and states of its
    own turns, and `update` (its reward). `turns`: each turn's author, when the caller has them already."""
    turns = turn_authors(traj, author_of) if turns is None else turns
    mine = [i for i, name in enumerate(turns) if name == author]
    own = {
        "earlier_steps": [_masked(step, author_of, author) for step in traj.earlier_steps],
        "turn_rewards": _pick(traj.turn_rewards, mine),
        "turn_states": _pick(traj.turn_states, mine),
    }
    return _masked(traj, author_of, author).model_copy(update={**own, **update})


def _masked(traj: Trajectory, author_of: Author, author: Hashable) -> Trajectory:
    segments = [
        seg if not seg.trainable or author_of(seg) == author else seg.model_copy(update={"trainable": False})
        for seg in traj.segments
    ]
    return traj.model_copy(update={"segments": segments})


def _pick(values: list[T] | None, keep: list[int]) -> list[T] | None:
    return None if values is None else [values[i] for i in keep if i < len(values)]


__all__ = ["Author", "author_view", "turn_authors"]
