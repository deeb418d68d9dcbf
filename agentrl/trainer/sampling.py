"""DAPO's batch-side techniques: dynamic sampling and the overlong (soft) length penalty.

From DAPO (Yu et al. 2025, "DAPO: An Open-Source LLM Reinforcement Learning System at Scale", arXiv:2503.14476):
    * dynamic sampling (§3.2, Eq. 11): a group whose G rewards are all equal has zero advantage for every
      member under GRPO-style estimators, so it contributes no gradient but still dilutes the batch. Such groups
      are dropped and more prompts are sampled until the batch holds the target number of groups;
    * overlong reward shaping (§3.4, Eq. 13): a soft, length-aware penalty added to the reward of responses
      approaching or exceeding the maximum length.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from agentrl.errors import UserError
from agentrl.loops.player_views import player_rows
from agentrl.types import Trajectory


def group_by_id(trajectories: Sequence[Trajectory]) -> dict[str, list[Trajectory]]:
    """Trajectories grouped by `group_id`, groups and members in order of first appearance."""
    groups: dict[str, list[Trajectory]] = {}
    for traj in trajectories:
        groups.setdefault(traj.group_id, []).append(traj)
    return groups


def has_reward_variance(group: Sequence[Trajectory]) -> bool:
    """True when the group's rewards are not all equal (0 < std); a group of one never has variance. An episode of
    several roles counts each role's reward (`agentrl.loops.player_views`): in self-play the winner's and the
    loser's differ even when player 0 always wins.

    Raises:
        UserError: a member has no reward.
    """
    rewards = []
    for traj in player_rows(list(group)):
        if traj.reward is None:
            raise UserError(f"trajectory {traj.id} has no reward; score groups before dynamic sampling")
        rewards.append(traj.reward)
    return max(rewards) != min(rewards)


def drop_zero_variance_groups(trajectories: Sequence[Trajectory]) -> list[list[Trajectory]]:
    """DAPO dynamic-sampling filter: the groups (lists of trajectories) whose rewards vary, in order.

    Keeps a group iff 0 < |{o_i : is_equivalent(a, o_i)}| < G, i.e. std({R_i}) > 0 (DAPO Eq. 11).
    """
    return [group for group in group_by_id(trajectories).values() if has_reward_variance(group)]


def groups_needed(num_kept_groups: int, target_num_groups: int) -> int:
    """How many more informative groups the batch needs to reach `target_num_groups` (never negative)."""
    return max(0, target_num_groups - num_kept_groups)


def groups_to_request(num_needed: int, keep_ratio: float, *, min_keep_ratio: float = 0.1) -> int:
    """Prompts to sample next so that, at the observed keep ratio, about `num_needed` groups survive the filter.

    `keep_ratio` is kept groups / sampled groups so far; it is floored at `min_keep_ratio` so that a run of
    all-degenerate groups cannot ask for an unbounded number.
    """
    if num_needed <= 0:
        return 0
    return math.ceil(num_needed / max(keep_ratio, min_keep_ratio))


@dataclass
class DynamicSamplingBuffer:
    """Accumulates informative groups over generation rounds until a training batch is full.

    Usage: `add(round)` after each generation round; while `needed > 0`, sample `groups_to_request(needed,
    keep_ratio)` more prompts (DAPO bounds the number of rounds); then `take()` the batch.
    """

    target_num_groups: int
    groups: list[list[Trajectory]] = field(default_factory=list)
    num_sampled_groups: int = 0

    def add(self, trajectories: Sequence[Trajectory]) -> int:
        """Filter one round of scored trajectories into the buffer; returns the groups kept from it."""
        kept = drop_zero_variance_groups(trajectories)
        self.num_sampled_groups += len(group_by_id(trajectories))
        self.groups.extend(kept)
        return len(kept)

    @property
    def needed(self) -> int:
        """Informative groups still missing from the batch."""
        return groups_needed(len(self.groups), self.target_num_groups)

    @property
    def keep_ratio(self) -> float:
        """Kept / sampled groups so far (1.0 before anything was sampled)."""
        return len(self.groups) / self.num_sampled_groups if self.num_sampled_groups else 1.0

    def take(self) -> list[Trajectory]:
        """The first `target_num_groups` groups, flattened (fewer if not full); surplus groups are discarded."""
        batch = [traj for group in self.groups[: self.target_num_groups] for traj in group]
        self.groups.clear()
        self.num_sampled_groups = 0
        return batch


def _check_lengths(max_length: int, cache_length: int) -> None:
    if not 0 < cache_length <= max_length:
        raise UserError(f"overlong cache_length must be in (0, max_length={max_length}], got {cache_length}")


def overlong_penalty(length: int, max_length: int, cache_length: int) -> float:
    """DAPO soft overlong punishment R_length(y) (Eq. 13), with L_max = max_length, L_cache = cache_length.

        R_length(y) = 0                                  if |y| ≤ L_max − L_cache
                    = ((L_max − L_cache) − |y|) / L_cache  if L_max − L_cache < |y| ≤ L_max
                    = −1                                 if L_max < |y|

    Added to the task reward. It falls linearly from 0 to −1 across the last L_cache tokens.
    """
    _check_lengths(max_length, cache_length)
    threshold = max_length - cache_length
    if length <= threshold:
        return 0.0
    if length <= max_length:
        return (threshold - length) / cache_length
    return -1.0


def overlong_penalty_tensor(lengths: torch.Tensor, max_length: int, cache_length: int) -> torch.Tensor:
    """`overlong_penalty` applied elementwise to a tensor of response lengths (float32 result)."""
    _check_lengths(max_length, cache_length)
    threshold = max_length - cache_length
    soft = (threshold - lengths.to(torch.float32)) / cache_length
    return soft.clamp(min=-1.0, max=0.0)
