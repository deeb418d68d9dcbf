"""Per-turn credit: the turns of scored trajectories as estimator input, and turn advantages onto tokens.

A turn is a maximal run of trainable segments (`Trajectory.turn_index`). Its reward comes from
`Trajectory.turn_rewards`; what the trajectory's reward adds beyond the turn rewards (reward components, DAPO's
overlong penalty) is credited to the last turn, so the turn rewards always sum to the trajectory's reward.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from agentrl.errors import UserError
from agentrl.trainer.batch import response_length
from agentrl.types import Trajectory


@dataclass(frozen=True)
class TurnEpisode:
    """One trajectory as a per-turn estimator sees it.

    Attributes:
        group_id: the group of its prompt.
        reward: R(τ), the trajectory's reward.
        turn_rewards: r_1..r_T, one per generated turn; they sum to `reward` (when T > 0).
        turn_states: the state key each turn started from (None when the loop records none).
        tree: its place in a tree rollout (`metadata["tree"]`: the tree's id, its path, the branch turns it went
            through), None for an episode played alone.
    """

    group_id: Hashable
    reward: float
    turn_rewards: list[float]
    turn_states: list[str] | None = None
    tree: dict[str, Any] | None = None

    @property
    def num_turns(self) -> int:
        return len(self.turn_rewards)


def turn_episodes(trajectories: Sequence[Trajectory], estimator: str) -> list[TurnEpisode]:
    """The scored trajectories as `TurnEpisode`s for the per-turn estimator named `estimator`.

    Raises:
        UserError: a trajectory has no reward, records no turn rewards, or not one per turn (the turns of its
            earlier step samples first, `Trajectory.step_samples`).
    """
    return [_episode(traj, estimator) for traj in trajectories]


def _episode(traj: Trajectory, estimator: str) -> TurnEpisode:
    where = f"trainer.advantage={estimator}: trajectory {traj.id}"
    if traj.reward is None:
        raise UserError(f"{where} has no reward; run the reward pipeline before computing advantages")
    if traj.turn_rewards is None:
        raise UserError(
            f"{where} (loop {traj.agent_name or '?'}) records no per-turn rewards; play it with a loop that does "
            "(gym, tool_agent), set Trajectory.turn_rewards in your loop, or use an outcome estimator (grpo, rloo, ...)"
        )
    turns = traj.num_turns_in_all_steps()
    for name, values in (("turn_rewards", traj.turn_rewards), ("turn_states", traj.turn_states)):
        if values is not None and len(values) != turns:
            raise UserError(f"{where} has {turns} generated turns but {len(values)} {name}; record one per turn")
    rewards = [float(r) for r in traj.turn_rewards]
    if rewards:  # the reward the turns do not account for goes to the last turn
        rewards[-1] += float(traj.reward) - sum(rewards)
    return TurnEpisode(traj.group_id, float(traj.reward), rewards, traj.turn_states, traj.metadata.get("tree"))


def step_sample_advantages(traj: Trajectory, turn_advantages: Sequence[float]) -> list[tuple[Trajectory, torch.Tensor]]:
    """Each step sample of `traj` (`Trajectory.step_samples`: earlier ones first) with its token advantages, from
    the advantages of all its turns in order: every sample takes the next `num_generated_turns` of them.

    Raises:
        ValueError: not one advantage per generated turn of all the step samples together.
    """
    if len(turn_advantages) != traj.num_turns_in_all_steps():
        raise ValueError(
            f"trajectory {traj.id}: {traj.num_turns_in_all_steps()} turns but {len(turn_advantages)} advantages"
        )
    out, at = [], 0
    for sample in traj.step_samples():
        turns = sample.num_generated_turns
        out.append((sample, token_advantages(sample, turn_advantages[at : at + turns])))
        at += turns
    return out


def with_turns_untrained(traj: Trajectory, turns: Sequence[int]) -> Trajectory:
    """A copy of `traj` in which the generated segments of `turns` (indices over all the step samples, earlier ones
    first) are not trainable: another trajectory trains those tokens (a tree's shared prefix). `traj` itself is left
    as it is, since it is what the run saves; `traj` when `turns` is empty. The copy shares the segments it leaves
    as they were. Take the token advantages after it, since it changes what `Trajectory.turn_index` counts."""
    if not turns:
        return traj
    wanted, at, copies = set(turns), 0, {}
    for sample in traj.step_samples():
        segments = [
            segment.model_copy(update={"trainable": False}) if turn is not None and at + turn in wanted else segment
            for segment, turn in zip(sample.segments, sample.turn_index(), strict=True)
        ]
        copies[id(sample)] = sample.model_copy(update={"segments": segments})
        at += sample.num_generated_turns
    earlier = [copies.get(id(sample), sample) for sample in traj.earlier_steps]
    return copies.get(id(traj), traj).model_copy(update={"earlier_steps": earlier})


def token_advantages(traj: Trajectory, turn_advantages: Sequence[float]) -> torch.Tensor:
    """Each turn's advantage on exactly that turn's generated tokens, as a float32 vector over the response
    (`response_length(traj)` tokens, aligned with `trajectory_to_tensors`); 0 on prompt-side, observation, tool and
    user tokens.

    Raises:
        ValueError: not one advantage per generated turn.
    """
    turn_of = traj.turn_index()
    if len(turn_advantages) != traj.num_generated_turns:
        raise ValueError(
            f"trajectory {traj.id}: {traj.num_generated_turns} turns but {len(turn_advantages)} advantages"
        )
    out = torch.zeros(response_length(traj), dtype=torch.float32)
    first = next((i for i, t in enumerate(turn_of) if t is not None), len(turn_of))
    at = 0
    for seg, turn in zip(traj.segments[first:], turn_of[first:], strict=True):
        n = len(seg.token_ids)
        if turn is not None:
            out[at : at + n] = float(turn_advantages[turn])
        at += n
    return out
