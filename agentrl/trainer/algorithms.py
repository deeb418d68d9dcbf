"""Advantage estimators for outcome rewards, in a registry named as in the literature.

Every estimator maps one scalar reward per sequence, plus the group id of the prompt the sequence answers, to
one advantage per sequence, which the trainer puts on every generated token of the sequence and on no tool,
observation or padding token (`agentrl.trainer.advantages`; `broadcast_to_tokens` does the same on a padded batch).
Per-turn estimators, one advantage per turn, are in `agentrl.trainer.turn_algorithms`.

Conventions shared by all estimators (a "group" is the G responses sampled for one prompt):
    * group statistics use the unbiased standard deviation (`torch.std`, as in TRL and verl);
    * a *degenerate* group — one member, or all rewards equal — carries no learning signal, so every member's
      advantage is exactly 0 (never NaN, never `0 / eps` noise).

Built-in names (`agentrl.trainer.registry.ADVANTAGES`): `grpo`, `dr_grpo`, `rloo`, `reinforce++`, `gspo`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

from agentrl.errors import UserError
from agentrl.trainer.registry import ADVANTAGES
from agentrl.types import Trajectory

GroupIds = Sequence[Hashable] | torch.Tensor
"""One group id per sequence: a list of hashables (e.g. `Trajectory.group_id`) or a 1-D tensor."""

DEFAULT_EPS = 1e-6


class AdvantageEstimator(Protocol):
    """`(rewards [B], group_ids [B], *, eps) -> advantages [B]`."""

    def __call__(self, rewards: torch.Tensor, group_ids: GroupIds, *, eps: float = DEFAULT_EPS) -> torch.Tensor: ...


def register_advantage(name: str) -> Callable[[AdvantageEstimator], AdvantageEstimator]:
    """Decorator registering an advantage estimator under `name` (the function is returned unchanged; a name
    already taken is refused)."""
    return ADVANTAGES.register(name)


def get_advantage(name: str) -> AdvantageEstimator:
    """The estimator registered under `name` (or at a dotted path).

    Raises:
        UserError: unknown name; the message lists the known ones.
    """
    return ADVANTAGES.get(name)


def compute_advantages(
    name: str, rewards: torch.Tensor, group_ids: GroupIds, *, eps: float = DEFAULT_EPS
) -> torch.Tensor:
    """Run the estimator registered under `name`: per-sequence advantages [B]."""
    return get_advantage(name)(rewards, group_ids, eps=eps)


def broadcast_to_tokens(advantages: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """Per-sequence advantages [B] → token-level advantages [B, R], zero where `response_mask` is 0."""
    if advantages.dim() != 1 or advantages.shape[0] != response_mask.shape[0]:
        raise ValueError(
            f"advantages must be [B] with B={response_mask.shape[0]} (response_mask {tuple(response_mask.shape)}), "
            f"got {tuple(advantages.shape)}"
        )
    return advantages[:, None] * response_mask.to(advantages.dtype)


def rewards_and_groups(trajectories: Sequence[Trajectory]) -> tuple[torch.Tensor, list[str]]:
    """Rewards [B] (float32) and group ids of scored trajectories, ready for an estimator.

    Raises:
        UserError: a trajectory has no reward (score the batch before computing advantages).
    """
    missing = [t.id for t in trajectories if t.reward is None]
    if missing:
        raise UserError(
            f"{len(missing)} trajectories have no reward (first: {missing[0]}); run the reward pipeline "
            "before computing advantages, or drop unscored trajectories"
        )
    rewards = torch.tensor([float(t.reward) for t in trajectories if t.reward is not None], dtype=torch.float32)
    return rewards, [t.group_id for t in trajectories]


@dataclass(frozen=True)
class GroupStats:
    """Statistics of each sequence's own group, gathered back to shape [B] (float64).

    Attributes:
        count: G, the number of sequences in the group.
        mean: mean_group(r).
        std: std_group(r), unbiased; 0 for a group of one.
        degenerate: True for a group of one or a group whose rewards are all equal.
    """

    count: torch.Tensor
    mean: torch.Tensor
    std: torch.Tensor
    degenerate: torch.Tensor


def group_index(group_ids: GroupIds) -> torch.Tensor:
    """Dense group indices [B] (long), numbered in order of first appearance."""
    ids: Sequence[Hashable] = group_ids.reshape(-1).tolist() if isinstance(group_ids, torch.Tensor) else group_ids
    first: dict[Hashable, int] = {}
    return torch.tensor([first.setdefault(g, len(first)) for g in ids], dtype=torch.long)


def group_stats(rewards: torch.Tensor, group_ids: GroupIds) -> GroupStats:
    """Per-group count, mean, unbiased std and degeneracy, each gathered to its members."""
    r = _check_rewards(rewards, group_ids).double()
    idx = group_index(group_ids).to(r.device)
    n_groups = int(idx.max()) + 1 if idx.numel() else 0
    count = torch.zeros(n_groups, dtype=r.dtype, device=r.device).index_add_(0, idx, torch.ones_like(r))
    mean = torch.zeros_like(count).index_add_(0, idx, r) / count
    sq_dev = torch.zeros_like(count).index_add_(0, idx, (r - mean[idx]) ** 2)
    std = (sq_dev / (count - 1).clamp(min=1)).sqrt()
    hi = torch.zeros_like(count).scatter_reduce_(0, idx, r, reduce="amax", include_self=False)
    lo = torch.zeros_like(count).scatter_reduce_(0, idx, r, reduce="amin", include_self=False)
    degenerate = (count <= 1) | (hi == lo)
    return GroupStats(count[idx], mean[idx], std[idx], degenerate[idx])


def _check_rewards(rewards: torch.Tensor, group_ids: GroupIds) -> torch.Tensor:
    if rewards.dim() != 1:
        raise ValueError(f"rewards must be 1-D [B], got shape {tuple(rewards.shape)}")
    if len(group_ids) != rewards.shape[0]:
        raise ValueError(f"{rewards.shape[0]} rewards but {len(group_ids)} group ids")
    if not torch.isfinite(rewards).all():
        raise ValueError("rewards contain NaN or inf; record reward failures as a finite score")
    return rewards


def _out(advantages: torch.Tensor, rewards: torch.Tensor) -> torch.Tensor:
    """Back to the rewards' floating dtype (float32 for integer rewards)."""
    dtype = rewards.dtype if rewards.is_floating_point() else torch.float32
    return advantages.to(dtype)


def grpo_advantage(rewards: torch.Tensor, group_ids: GroupIds, *, eps: float = DEFAULT_EPS) -> torch.Tensor:
    """GRPO group-normalized advantage (Shao et al. 2024, DeepSeekMath, arXiv:2402.03300, §4.1.2).

        Â_i = (r_i − mean({r_1..r_G})) / (std({r_1..r_G}) + ε)

    Also registered as `gspo`: GSPO (Zheng et al. 2025, arXiv:2507.18071, Eq. 6) uses the same group-based
    advantage; what differs is its sequence-level ratio, in the `gspo` policy loss. Degenerate groups → 0.
    """
    s = group_stats(rewards, group_ids)
    adv = (rewards.double() - s.mean) / (s.std + eps)
    return _out(torch.where(s.degenerate, 0.0, adv), rewards)


def dr_grpo_advantage(rewards: torch.Tensor, group_ids: GroupIds, *, eps: float = DEFAULT_EPS) -> torch.Tensor:
    """Dr. GRPO advantage (Liu et al. 2025, "Understanding R1-Zero-Like Training", arXiv:2503.20783, Eq. 3).

        Â_i = r_i − mean({r_1..r_G})

    No division by std({r}): that term up-weights prompts that are too easy or too hard (question-level
    difficulty bias). `eps` is unused. Degenerate groups → 0.
    """
    s = group_stats(rewards, group_ids)
    return _out(torch.where(s.degenerate, 0.0, rewards.double() - s.mean), rewards)


def rloo_advantage(rewards: torch.Tensor, group_ids: GroupIds, *, eps: float = DEFAULT_EPS) -> torch.Tensor:
    """RLOO, REINFORCE leave-one-out (Kool et al. 2019; Ahmadian et al. 2024, arXiv:2402.14740, Eq. 7).

        Â_i = r_i − 1/(G−1) · Σ_{j≠i} r_j  =  G/(G−1) · (r_i − mean({r_1..r_G}))

    `eps` is unused. Degenerate groups (G = 1 has no other sample to form a baseline) → 0.
    """
    s = group_stats(rewards, group_ids)
    adv = (rewards.double() - s.mean) * s.count / (s.count - 1).clamp(min=1)
    return _out(torch.where(s.degenerate, 0.0, adv), rewards)


def reinforce_pp_baseline_advantage(
    rewards: torch.Tensor, group_ids: GroupIds, *, eps: float = DEFAULT_EPS
) -> torch.Tensor:
    """REINFORCE++-baseline (Hu et al. 2025, "REINFORCE++", arXiv:2501.03262, §3, group-mean baseline).

        A_i    = r_i − mean_group(r)                                    (group-mean baseline)
        Â_i    = (A_i − mean_batch(A)) / (std_batch(A) + ε)              (global batch normalization)

    Batch statistics are over the B sequences (unbiased std). verl/OpenRLHF whiten over tokens instead, i.e.
    weighted by response length; with sequence weights mean_batch(A) is 0 up to rounding, so degenerate groups
    stay exactly 0, as they do here by construction.
    """
    s = group_stats(rewards, group_ids)
    centered = torch.where(s.degenerate, 0.0, rewards.double() - s.mean)
    if centered.numel() < 2:
        return _out(torch.zeros_like(centered), rewards)
    adv = (centered - centered.mean()) / (centered.std() + eps)
    return _out(torch.where(s.degenerate, 0.0, adv), rewards)
