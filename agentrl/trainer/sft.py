"""Supervised fine-tuning on demonstrations (`trainer.objective=sft`): the negative log-likelihood of the tokens the
demonstrator wrote, in the same engine, ranks, LoRA, checkpoints and metrics as the policy-gradient step.

A demonstration is a `Trajectory` (`agentrl.trainer.demonstrations` loads them): its trainable segments, the
assistant's replies, are the targets; the prompt, tool results, user turns and observations are context, never
trained. The targets are scored at temperature 1 (the policy's own distribution), whatever temperature a teacher
sampled them at, and need no logprobs.
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import Tensor

from agentrl.config.schema import TrainerConfig
from agentrl.trainer.batch import PaddedBatch, collate
from agentrl.trainer.engine import PolicyEngine, batch_to
from agentrl.trainer.loss_terms import AggMode, aggregate
from agentrl.trainer.step import reduce_over_ranks
from agentrl.types import Trajectory

DEFAULT_AGG: AggMode = "token-mean"
"""Every target token weighs the same (as transformers' `labels` loss): a long demonstration teaches more tokens."""


def sft_loss(
    logprobs: Tensor,
    mask: Tensor,
    mode: AggMode = DEFAULT_AGG,
    *,
    num_tokens: float | None = None,
    num_seqs: float | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """The negative log-likelihood of the target tokens (`mask`), aggregated by `mode` (`trainer.loss_agg`).

    Args:
        logprobs: [B, R] log-probabilities of the response tokens under the policy, with their gradient.
        mask: [B, R] 1 on target (assistant) tokens, 0 on context and padding: these never contribute.
        num_tokens, num_seqs: the whole batch's target tokens and sequences, when `logprobs` holds one micro-batch
            of it (so that the micro-batches' losses add up to the batch's).
    """
    if logprobs.shape != mask.shape or logprobs.dim() != 2:
        raise ValueError(f"logprobs and mask must both be [B, R], got {tuple(logprobs.shape)}, {tuple(mask.shape)}")
    mask = mask.bool()
    loss = aggregate(-logprobs, mask, mode, num_tokens=num_tokens, num_seqs=num_seqs)
    targets = mask.sum().clamp(min=1)
    nll = float((-logprobs.detach()).masked_fill(~mask, 0.0).sum() / targets)
    return loss, {"loss": float(loss.detach()), "nll": nll}


def sft_step(
    engine: PolicyEngine,
    cfg: TrainerConfig,
    demonstrations: list[Trajectory],
    pad_token_id: int,
    shard: tuple[int, int] = (0, 1),
) -> dict[str, float]:
    """One optimizer step on `demonstrations` (this rank trains rows `rank::world_size`); the train/* metrics.

    The loss is normalised over the whole batch (all ranks), so that the micro-batches and ranks add up to it;
    `train/nll` is the mean negative log-likelihood per target token of this rank's rows.
    """
    if not demonstrations:
        return {"train/skipped": 1.0}
    mode = cfg.loss_agg or DEFAULT_AGG
    rows = [t for t in demonstrations if t.num_generated_tokens]
    num_tokens = float(sum(t.num_generated_tokens for t in rows))
    batch = demonstration_batch(rows, shard, pad_token_id, engine.device)

    def micro_loss(logp: Tensor, rows_slice: slice, entropy: Tensor | None = None) -> tuple[Tensor, dict[str, float]]:
        return sft_loss(logp, batch.response_mask[rows_slice], mode, num_tokens=num_tokens, num_seqs=len(rows))

    metrics = engine.train_step(batch, micro_loss)
    out = {k if k.startswith("train/") else f"train/{k}": v for k, v in metrics.items()}
    if shard[1] > 1:
        out = reduce_over_ranks(out, float(batch.response_mask.sum()), engine)
    out["train/tokens"] = num_tokens
    out["train/rows_trained"] = float(len(rows))
    return out


def demonstration_batch(
    demonstrations: list[Trajectory], shard: tuple[int, int], pad_token_id: int, device: torch.device
) -> PaddedBatch:
    """This rank's rows, shortest first (one length a micro-batch), scored at temperature 1; one fully masked row
    when the rank has none (it still runs its forward, as every rank must)."""
    rank, world = shard
    mine = sorted(demonstrations[rank::world], key=lambda t: t.num_tokens)
    batch = collate(mine or demonstrations[:1], pad_token_id, require_logprobs=False)
    batch = replace(batch, temperatures=None)
    if not mine:
        batch = replace(batch, response_mask=torch.zeros_like(batch.response_mask))
    return batch_to(batch, device)
