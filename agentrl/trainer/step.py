"""One policy-gradient step on scored trajectories: advantages, old (and reference) logprobs, the configured loss."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import torch

from agentrl.config.schema import TrainerConfig
from agentrl.trainer.advantages import row_advantages
from agentrl.trainer.batch import PaddedBatch, collate, response_length
from agentrl.trainer.engine import PolicyEngine, batch_to, is_additive
from agentrl.trainer.losses import PolicyLossConfig, get_loss
from agentrl.types import Trajectory

if TYPE_CHECKING:
    from agentrl.trainer.reference import ReferencePolicy

SAME_ON_EVERY_RANK = ("train/grad_norm", "train/lr")
REDUCED_ALREADY = "train/mismatch_by_version/"
"""Metrics `policy_step` sums over the ranks itself."""
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
        is_level=cfg.is_level,
        is_mode=cfg.is_mode,
        is_mask_low=cfg.is_mask_low,
        entropy_coef=cfg.entropy_coef,
        norm_constant=float(max_response_len) if max_response_len else None,
    )


def policy_step(
    engine: PolicyEngine,
    cfg: TrainerConfig,
    trajectories: list[Trajectory],
    pad_token_id: int,
    shard: tuple[int, int] = (0, 1),
    reference: ReferencePolicy | None = None,
    entropy_choice_ids: list[int] | None = None,
) -> dict[str, float]:
    """Compute the token advantages of `trajectories` (`row_advantages`), then take `ppo_epochs` x
    `ppo_mini_batches` optimizer steps; returns train/* metrics.

    With `shard=(rank, world_size)`, advantages are computed over all trajectories and this rank trains on rows
    `rank::world_size` of each mini-batch (data parallel under FSDP); the metrics are reduced over the ranks, so
    every rank returns the global figures. A rank left without rows runs one fully masked row.

    With `cfg.skip_zero_advantage`, no KL penalty and no entropy bonus, rows whose token advantages are all 0 are
    left out of the forward and backward: they contribute no gradient, and the denominators stay those of the whole
    (mini-)batch, so the update is the same. The optimizer still steps when no row is left (on one masked row), as
    it would have.

    One update (the default) on the whole batch: π_θ_old is the current policy and its logprobs come from the
    training forward itself (the ratio is exactly 1). Several updates (`ppo_mini_batches` contiguous shares of the
    batch, `ppo_epochs` passes): π_θ_old is recomputed once, before the first update, for every mini-batch, so the
    later updates see real ratios and the clipping acts. Metrics are the mean over the updates (`train/lr`: the
    step's). `train/rollout_logprob_abs_diff` is the mean |rollout logprob − π_θ_old logprob| over trainable
    tokens: the training-inference mismatch of the rollout engine. With a `reference`, `train/kl` is the KL
    estimator (`cfg.kl_estimator`) to it, aggregated like the loss, and `cfg.kl_coef > 0` adds it to the loss.
    With `cfg.entropy_coef > 0` and `entropy_choice_ids` (the first tokens of `cfg.entropy_choices`), the entropy
    bonus is over those tokens at each turn's first token (`agentrl.trainer.choices`), not over the vocabulary.
    """
    if not trajectories:
        return {"train/skipped": 1.0}
    advantages = row_advantages(cfg, trajectories)
    trajectories = advantages.rows
    lcfg = loss_config(cfg, max(response_length(t) for t in trajectories))
    skip = cfg.skip_zero_advantage and cfg.kl_coef == 0 and cfg.entropy_coef == 0
    shares = _shares(len(trajectories), cfg.ppo_mini_batches)
    tokens = advantages.tokens
    parts = [
        _part([trajectories[i] for i in rows], [tokens[i] for i in rows], skip, shard, pad_token_id, engine, reference)
        for rows in shares
    ]
    several = len(parts) * cfg.ppo_epochs > 1
    if several:  # π_θ_old of every mini-batch, before any update
        for part in parts:
            part.old = engine.logprobs(part.batch).detach()
    updates = [(epoch, part) for epoch in range(cfg.ppo_epochs) for part in parts]
    runs = [
        _update(engine, part, lcfg, get_loss(cfg.loss), last=(i == len(updates) - 1), choice_ids=entropy_choice_ids)
        for i, (_, part) in enumerate(updates)
    ]
    out = _mean_of(runs)
    kept = sum(len(part.kept) for part in parts)
    out.pop("train/rollout_logprob_abs_diff", None)
    if kept:
        out["train/rollout_logprob_abs_diff"] = _mismatch_of(parts)
        out.update(_mismatch_by_version(parts, _versions_of(trajectories), engine if shard[1] > 1 else None))
    else:  # no trained row: no figures of the policy's tokens (rather than 0s that read as perfect or collapsed)
        out.pop("train/entropy", None)
    if shard[1] > 1:
        local_tokens = float(sum(part.batch.response_mask.sum() for part in parts))
        out = reduce_over_ranks(out, local_tokens, engine)
    out.update(advantages.metrics)
    out["train/tokens"] = float(sum(t.num_generated_tokens for t in trajectories))
    out["train/rows_trained"] = float(kept)
    out["train/ppo_updates"] = float(len(updates))
    return out


@dataclass
class _Part:
    """One mini-batch: this rank's padded rows of it, their token advantages, denominators over the whole
    mini-batch (all ranks), reference and π_θ_old logprobs."""

    kept: list[Trajectory]
    batch: PaddedBatch
    token_adv: torch.Tensor
    num_tokens: float
    num_seqs: float
    ref_logprobs: torch.Tensor | None
    old: torch.Tensor | None = None
    trainer_logprobs: torch.Tensor | None = None


def _shares(count: int, mini_batches: int) -> list[list[int]]:
    """`mini_batches` contiguous, near-equal shares of `count` rows (fewer when there are fewer rows)."""
    n = max(1, min(mini_batches, count))
    size, extra = divmod(count, n)
    out, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        out.append(list(range(start, end)))
        start = end
    return out


def _part(
    trajectories: list[Trajectory],
    token_advantages: list[torch.Tensor],
    skip_zero: bool,
    shard: tuple[int, int],
    pad_token_id: int,
    engine: PolicyEngine,
    reference: ReferencePolicy | None,
) -> _Part:
    kept, kept_adv = trajectories, token_advantages
    if skip_zero:
        rows = _rows_with_signal(token_advantages)
        kept, kept_adv = [trajectories[i] for i in rows], [token_advantages[i] for i in rows]
    batch, token_adv = _rank_batch(kept, kept_adv, shard, pad_token_id, engine.device, fallback=trajectories[0])
    return _Part(
        kept=kept,
        batch=batch,
        token_adv=token_adv,
        num_tokens=float(sum(t.num_generated_tokens for t in trajectories)),
        num_seqs=float(len(trajectories)),
        ref_logprobs=reference.logprobs(engine, batch) if reference is not None else None,
    )


def _update(
    engine: PolicyEngine,
    part: _Part,
    lcfg: PolicyLossConfig,
    loss: Any,
    last: bool,
    choice_ids: list[int] | None = None,
) -> dict[str, float]:
    """One optimizer step on one mini-batch."""
    batch = part.batch
    part.trainer_logprobs = torch.zeros_like(batch.rollout_logprobs) if part.old is None else part.old

    def micro_loss(
        logp: torch.Tensor, rows: slice, entropy: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, dict[str, float]]:
        if part.old is None:
            # one update per batch: π_θ_old is this very forward's policy, so log π_old = log π_θ detached (as
            # TRL does with num_iterations=1), which saves a whole forward pass over the batch
            old = logp.detach()
            part.trainer_logprobs[rows] = old
        else:
            old = part.old[rows]
        return loss(
            logp,
            old,
            part.token_adv[rows],
            batch.response_mask[rows],
            lcfg,
            ref_logprobs=part.ref_logprobs[rows] if part.ref_logprobs is not None else None,
            rollout_logprobs=batch.rollout_logprobs[rows],
            num_tokens=part.num_tokens,
            num_seqs=part.num_seqs,
            entropy=entropy,
        )

    bonus = lcfg.entropy_coef > 0
    metrics = engine.train_step(batch, micro_loss, last=last, entropy_grad=bonus, entropy_choice_ids=choice_ids)
    return {k if k.startswith("train/") else f"train/{k}": v for k, v in metrics.items()}


def _mean_of(runs: list[dict[str, float]]) -> dict[str, float]:
    """The mean of each metric over the updates; the learning rate is the step's (the last update's)."""
    out = {key: sum(run.get(key, 0.0) for run in runs) / len(runs) for key in runs[0]}
    out["train/lr"] = runs[-1].get("train/lr", 0.0)
    return out


def _mismatch_of(parts: list[_Part]) -> float:
    """Mean |rollout − trainer (π_θ_old) logprob| over the trainable tokens of all mini-batches."""
    total, tokens = 0.0, 0.0
    for part in parts:
        mask = part.batch.response_mask.bool()
        if part.trainer_logprobs is None or not mask.any():
            continue
        total += float((part.batch.rollout_logprobs - part.trainer_logprobs).abs()[mask].sum())
        tokens += float(mask.sum())
    return total / tokens if tokens else 0.0


def _versions_of(trajectories: list[Trajectory]) -> list[int]:
    """The policy versions that generated any token of `trajectories` (the same list on every rank)."""
    return sorted({s.policy_version for t in trajectories for s in t.segments if s.trainable} - {None})


def _mismatch_by_version(parts: list[_Part], versions: list[int], engine: PolicyEngine | None) -> dict[str, float]:
    """`train/mismatch_by_version/<v>`: `_mismatch_of` over the tokens policy version v generated, summed over
    the ranks when `engine` is given (sharded: each rank holds some rows)."""
    sums = torch.zeros(2 * len(versions), dtype=torch.float64)
    for part in parts:
        if part.trainer_logprobs is None or part.batch.versions is None:
            continue
        mask = part.batch.response_mask.bool()
        diff = (part.batch.rollout_logprobs - part.trainer_logprobs).abs()[mask].double().cpu()
        token_versions = part.batch.versions[mask].cpu()
        for i, version in enumerate(versions):
            chosen = diff[token_versions == version]
            sums[2 * i] += chosen.sum()
            sums[2 * i + 1] += chosen.numel()
    if engine is not None and versions:
        import torch.distributed as dist

        packed = sums.to(engine.device)
        dist.all_reduce(packed, group=engine.mesh.get_group())
        sums = packed.cpu()
    pairs = sums.view(-1, 2).tolist() if versions else []
    return {f"train/mismatch_by_version/{v}": total / n for v, (total, n) in zip(versions, pairs, strict=True) if n}


def _rows_with_signal(token_advantages: list[torch.Tensor]) -> list[int]:
    return [i for i, adv in enumerate(token_advantages) if adv.numel() and float(adv.abs().max()) > ZERO_ADVANTAGE]


def _rank_batch(
    trajectories: list[Trajectory],
    token_advantages: list[torch.Tensor],
    shard: tuple[int, int],
    pad_token_id: int,
    device: torch.device,
    fallback: Trajectory,
) -> tuple[PaddedBatch, torch.Tensor]:
    """This rank's rows `rank::world`, shortest first, and their token advantages [b, R] (0 on padding), on
    `device`; one masked row (of `fallback`) when it has none."""
    rank, world = shard
    # Sorted by length, so that each micro-batch holds rows of about one length (see `micro_batches`), and rows of
    # one length by prompt, so that a micro-batch holds a prompt's repeats together (`share_prompt_prefix`).
    by_length = sorted(zip(trajectories[rank::world], token_advantages[rank::world], strict=True), key=_order)
    mine = [trajectory for trajectory, _ in by_length]
    if not mine:
        batch = batch_to(collate([fallback], pad_token_id), device)
        masked = replace(batch, response_mask=torch.zeros_like(batch.response_mask))
        return masked, torch.zeros(batch.response_mask.shape, device=device)
    batch = batch_to(collate(mine, pad_token_id), device)
    token_adv = torch.zeros(batch.response_mask.shape, dtype=torch.float32)
    for row, (_, adv) in enumerate(by_length):
        token_adv[row, : adv.numel()] = adv
    return batch, token_adv.to(device)


def _order(row: tuple[Trajectory, torch.Tensor]) -> tuple[int, list[int]]:
    segments = row[0].segments
    prompt_end = next((i for i, segment in enumerate(segments) if segment.trainable), len(segments))
    prompt = [token for segment in segments[:prompt_end] for token in segment.token_ids]
    return sum(len(segment.token_ids) for segment in segments), prompt


def reduce_over_ranks(metrics: dict[str, float], local_tokens: float, engine: PolicyEngine) -> dict[str, float]:
    """Global metrics: parts of sums (losses, kl) are added, rates are weighted by each rank's loss tokens."""
    import torch.distributed as dist

    keys = [k for k in sorted(metrics) if k not in SAME_ON_EVERY_RANK and not k.startswith(REDUCED_ALREADY)]
    values = [metrics[k] if is_additive(k) else metrics[k] * local_tokens for k in keys]
    packed = torch.tensor([local_tokens, *values], dtype=torch.float64, device=engine.device)
    dist.all_reduce(packed, group=engine.mesh.get_group())
    total = max(float(packed[0]), 1.0)
    out = dict(metrics)
    for key, value in zip(keys, packed[1:].tolist(), strict=True):
        out[key] = value if is_additive(key) else value / total
    return out
