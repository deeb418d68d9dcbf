"""One policy-gradient step on scored trajectories: advantages, old (and reference) logprobs, the configured loss."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import torch

from agentrl.config.schema import TrainerConfig
from agentrl.trainer.algorithms import broadcast_to_tokens, compute_advantages, rewards_and_groups
from agentrl.trainer.batch import PaddedBatch, collate, response_length
from agentrl.trainer.engine import PolicyEngine, batch_to, is_additive
from agentrl.trainer.losses import PolicyLossConfig, get_loss
from agentrl.types import Trajectory

if TYPE_CHECKING:
    from agentrl.trainer.reference import ReferencePolicy

SAME_ON_EVERY_RANK = ("train/grad_norm", "train/lr")
ZERO_ADVANTAGE = 1e-8
"""|advantage| at or below this is no signal (GRPO's normalized zeros come out as ~1e-11, not 0)."""


def loss_config(cfg: TrainerConfig, max_response_len: int | None = None) -> PolicyLossConfig:
    """The policy-loss hyper-parameters of a trainer config.

    `max_response_len` (of the whole batch) is Dr. GRPO's norm constant, so that it does not depend on which
    rows a rank or a micro-batch holds.
    """
    return PolicyLossConfig(
        clip_low=cfg.clip_low,
        clip_high=cfg.clip_high,
        kl_coef=cfg.kl_coef,
        kl_type=cfg.kl_estimator,
        loss_agg_mode=cfg.loss_agg,
        tis_cap=cfg.tis_cap,
        norm_constant=float(max_response_len) if max_response_len else None,
    )


def policy_step(
    engine: PolicyEngine,
    cfg: TrainerConfig,
    trajectories: list[Trajectory],
    pad_token_id: int,
    shard: tuple[int, int] = (0, 1),
    reference: ReferencePolicy | None = None,
) -> dict[str, float]:
    """Compute advantages for `trajectories`, then take one optimizer step; returns train/* metrics.

    With `shard=(rank, world_size)`, advantages and loss denominators are computed over all trajectories and
    this rank trains on rows `rank::world_size` (data parallel under FSDP); the metrics are reduced over the
    ranks, so every rank returns the global figures. A rank left without rows runs one fully masked row.

    With `cfg.skip_zero_advantage` and no KL penalty, rows whose advantage is 0 are left out of the forward and
    backward: they contribute no gradient, and the denominators stay those of the whole batch, so the update is
    the same. The optimizer still steps when no row is left (on one masked row), as it would have.

    The step is one update on the whole batch (cut into micro-batches only for memory), so the PPO ratio's
    π_θ_old is the current policy and its logprobs come from the training forward itself.
    `train/rollout_logprob_abs_diff` is the mean |rollout logprob − trainer logprob| over trainable tokens: the
    training-inference mismatch of the rollout engine. With a `reference`, `train/kl` is the KL estimator
    (`cfg.kl_estimator`) to it, aggregated like the loss, and `cfg.kl_coef > 0` adds it to the loss.
    """
    if not trajectories:
        return {"train/skipped": 1.0}
    rewards, groups = rewards_and_groups(trajectories)
    advantages = compute_advantages(cfg.advantage, rewards, groups)
    num_tokens = float(sum(t.num_generated_tokens for t in trajectories))
    num_seqs = float(len(trajectories))
    lcfg = loss_config(cfg, max(response_length(t) for t in trajectories))
    trained = _rows_with_signal(advantages) if cfg.skip_zero_advantage and cfg.kl_coef == 0 else None
    kept, kept_adv = trajectories, advantages
    if trained is not None:
        kept, kept_adv = [trajectories[i] for i in trained], advantages[trained]
    batch, local_adv = _rank_batch(kept, kept_adv, shard, pad_token_id, engine.device, fallback=trajectories[0])
    ref_logprobs = reference.logprobs(engine, batch) if reference is not None else None
    token_adv = broadcast_to_tokens(local_adv, batch.response_mask)
    trainer_logprobs = torch.zeros_like(batch.rollout_logprobs)
    loss = get_loss(cfg.loss)

    def micro_loss(logp: torch.Tensor, rows: slice) -> tuple[torch.Tensor, dict[str, float]]:
        # one update per batch: π_θ_old is this very forward's policy, so log π_old = log π_θ detached (as TRL
        # does with num_iterations=1), which saves a whole forward pass over the batch
        old = logp.detach()
        trainer_logprobs[rows] = old
        return loss(
            logp,
            old,
            token_adv[rows],
            batch.response_mask[rows],
            lcfg,
            ref_logprobs=ref_logprobs[rows] if ref_logprobs is not None else None,
            rollout_logprobs=batch.rollout_logprobs[rows],
            num_tokens=num_tokens,
            num_seqs=num_seqs,
        )

    metrics = engine.train_step(batch, micro_loss)
    out = {k if k.startswith("train/") else f"train/{k}": v for k, v in metrics.items()}
    out.pop("train/rollout_logprob_abs_diff", None)
    if kept:
        out["train/rollout_logprob_abs_diff"] = _mismatch(batch, trainer_logprobs)
    else:  # no trained row: no figures of the policy's tokens (rather than 0s that read as perfect or collapsed)
        out.pop("train/entropy", None)
    if shard[1] > 1:
        out = _reduce_over_ranks(out, float(batch.response_mask.sum()), engine)
    out["train/advantage_abs_mean"] = float(advantages.abs().mean())
    out["train/advantage_std"] = float(advantages.std(unbiased=False))
    out["train/advantage_max"] = float(advantages.max())
    out["train/advantage_min"] = float(advantages.min())
    out["train/tokens"] = num_tokens
    out["train/rows_trained"] = float(len(kept))
    return out


def _rows_with_signal(advantages: torch.Tensor) -> list[int]:
    return [i for i, a in enumerate(advantages.tolist()) if abs(a) > ZERO_ADVANTAGE]


def _rank_batch(
    trajectories: list[Trajectory],
    advantages: torch.Tensor,
    shard: tuple[int, int],
    pad_token_id: int,
    device: torch.device,
    fallback: Trajectory,
) -> tuple[PaddedBatch, torch.Tensor]:
    """This rank's rows `rank::world` and their advantages, on `device`; one masked row (of `fallback`) when it
    has none."""
    rank, world = shard
    mine = trajectories[rank::world]
    if mine:
        return batch_to(collate(mine, pad_token_id), device), advantages[rank::world].to(device)
    batch = batch_to(collate([fallback], pad_token_id), device)
    return replace(batch, response_mask=torch.zeros_like(batch.response_mask)), torch.zeros(1, device=device)


def _reduce_over_ranks(metrics: dict[str, float], local_tokens: float, engine: PolicyEngine) -> dict[str, float]:
    """Global metrics: parts of sums (losses, kl) are added, rates are weighted by each rank's loss tokens."""
    import torch.distributed as dist

    keys = [k for k in sorted(metrics) if k not in SAME_ON_EVERY_RANK]
    values = [metrics[k] if is_additive(k) else metrics[k] * local_tokens for k in keys]
    packed = torch.tensor([local_tokens, *values], dtype=torch.float64, device=engine.device)
    dist.all_reduce(packed, group=engine.mesh.get_group())
    total = max(float(packed[0]), 1.0)
    out = dict(metrics)
    for key, value in zip(keys, packed[1:].tolist(), strict=True):
        out[key] = value if is_additive(key) else value / total
    return out


def _mismatch(batch: PaddedBatch, trainer_logprobs: torch.Tensor) -> float:
    mask = batch.response_mask.bool()
    if not mask.any():
        return 0.0
    return float((batch.rollout_logprobs - trainer_logprobs).abs()[mask].mean())
