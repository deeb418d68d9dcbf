"""One policy-gradient step on scored trajectories: advantages, old logprobs, the configured loss."""

from __future__ import annotations

import torch

from agentrl.config.schema import TrainerConfig
from agentrl.trainer.algorithms import broadcast_to_tokens, compute_advantages, rewards_and_groups
from agentrl.trainer.batch import PaddedBatch, collate
from agentrl.trainer.engine import PolicyEngine
from agentrl.trainer.losses import PolicyLossConfig, get_loss
from agentrl.types import Trajectory


def loss_config(cfg: TrainerConfig) -> PolicyLossConfig:
    return PolicyLossConfig(
        clip_low=cfg.clip_low, clip_high=cfg.clip_high, kl_coef=cfg.kl_coef, loss_agg_mode=cfg.loss_agg
    )


def policy_step(
    engine: PolicyEngine,
    cfg: TrainerConfig,
    trajectories: list[Trajectory],
    pad_token_id: int,
    shard: tuple[int, int] = (0, 1),
) -> dict[str, float]:
    """Compute advantages for `trajectories`, then take one optimizer step; returns train/* metrics.

    With `shard=(rank, world_size)`, advantages and loss denominators are computed over all trajectories and
    this rank trains on rows `rank::world_size` (data parallel under FSDP).

    `train/rollout_logprob_abs_diff` is the mean |rollout logprob − trainer logprob| over trainable tokens: the
    training-inference mismatch of the rollout engine.
    """
    if not trajectories:
        return {"train/skipped": 1.0}
    rewards, groups = rewards_and_groups(trajectories)
    rank, world = shard
    advantages = compute_advantages(cfg.advantage, rewards, groups)[rank::world]
    num_tokens = float(sum(t.num_generated_tokens for t in trajectories))
    num_seqs = float(len(trajectories))
    batch = collate(trajectories[rank::world], pad_token_id)
    old_logprobs = engine.logprobs(batch)
    token_adv = broadcast_to_tokens(advantages, batch.response_mask)
    loss = get_loss(cfg.loss)
    lcfg = loss_config(cfg)

    def micro_loss(logp: torch.Tensor, rows: slice) -> tuple[torch.Tensor, dict[str, float]]:
        return loss(
            logp,
            old_logprobs[rows],
            token_adv[rows],
            batch.response_mask[rows],
            lcfg,
            rollout_logprobs=batch.rollout_logprobs[rows],
            num_tokens=num_tokens,
            num_seqs=num_seqs,
        )

    metrics = engine.train_step(batch, micro_loss)
    out = {f"train/{k}": v for k, v in metrics.items() if not k.startswith("train/")}
    out.update({k: v for k, v in metrics.items() if k.startswith("train/")})
    out["train/advantage_abs_mean"] = float(advantages.abs().mean())
    out["train/tokens"] = num_tokens
    out["train/rollout_logprob_abs_diff"] = _mismatch(batch, old_logprobs)
    return out


def _mismatch(batch: PaddedBatch, trainer_logprobs: torch.Tensor) -> float:
    mask = batch.response_mask.bool()
    if not mask.any():
        return 0.0
    return float((batch.rollout_logprobs - trainer_logprobs).abs()[mask].mean())
