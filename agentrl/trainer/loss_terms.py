"""The terms every policy loss shares: masked means, token aggregation, KL estimators, TIS weights, ratios."""

from __future__ import annotations

from typing import Literal, get_args

import torch
from torch import Tensor

from agentrl.errors import UserError

AggMode = Literal["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"]
KLType = Literal["k1", "k2", "k3"]

LOG_RATIO_CLAMP = 20.0
"""|log r| is clamped to this before exp() (as verl does) so that a far off-policy token cannot overflow."""


def masked_mean(x: Tensor, mask: Tensor) -> Tensor:
    """Mean of `x` over positions where `mask` is true (0 when there are none)."""
    mask = mask.bool()
    return torch.where(mask, x, 0.0).sum() / mask.sum().clamp(min=1).to(x.dtype)


def aggregate(
    loss_mat: Tensor,
    mask: Tensor,
    mode: AggMode,
    *,
    norm_constant: float | None = None,
    num_tokens: float | None = None,
    num_seqs: float | None = None,
) -> Tensor:
    """Reduce a per-token loss [B, R] to a scalar; masked positions never contribute.

    With n_i the unmasked tokens of sequence i and S the sequences having n_i > 0:
        token-mean:              Σ_i Σ_t ℓ_{i,t} / Σ_i n_i                 (DAPO's token-level loss)
        seq-mean-token-sum:      1/|S| Σ_i Σ_t ℓ_{i,t}
        seq-mean-token-mean:     1/|S| Σ_i (1/n_i) Σ_t ℓ_{i,t}             (GRPO, GSPO, SAPO)
        seq-mean-token-sum-norm: 1/|S| Σ_i (1/L) Σ_t ℓ_{i,t}, L = norm_constant or R   (Dr. GRPO)

    `num_tokens` / `num_seqs` replace Σ_i n_i / |S| when a mini-batch is cut into micro-batches: pass the
    mini-batch totals so that the micro-batch losses sum to the mini-batch loss.
    """
    mask = mask.bool()
    token_sums = torch.where(mask, loss_mat, 0.0).sum(-1)
    counts = mask.sum(-1).to(loss_mat.dtype)
    if mode == "token-mean":
        return token_sums.sum() / (num_tokens if num_tokens is not None else counts.sum().clamp(min=1))
    if mode == "seq-mean-token-sum":
        per_seq = token_sums
    elif mode == "seq-mean-token-mean":
        per_seq = token_sums / counts.clamp(min=1)
    elif mode == "seq-mean-token-sum-norm":
        per_seq = token_sums / (norm_constant if norm_constant is not None else mask.shape[-1])
    else:
        raise UserError(f"unknown loss_agg_mode {mode!r}; known: {', '.join(get_args(AggMode))}")
    n_seqs = num_seqs if num_seqs is not None else (counts > 0).sum().clamp(min=1)
    return per_seq.sum() / n_seqs


def kl_penalty(logprobs: Tensor, ref_logprobs: Tensor, kind: KLType) -> Tensor:
    """Per-token estimator of KL(π_θ ‖ π_ref) from samples of π_θ (Schulman 2020).

    k1 = log π_θ − log π_ref
    k2 = ½ (log π_θ − log π_ref)²
    k3 = exp(log π_ref − log π_θ) − (log π_ref − log π_θ) − 1     (≥ 0, unbiased; used by GRPO)
    """
    diff = (logprobs - ref_logprobs).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    if kind == "k1":
        return diff
    if kind == "k2":
        return 0.5 * diff**2
    if kind == "k3":
        return torch.exp(-diff) + diff - 1.0
    raise UserError(f"unknown kl_type {kind!r}; known: {', '.join(get_args(KLType))}")


def tis_weights(old_logprobs: Tensor, rollout_logprobs: Tensor, cap: float) -> tuple[Tensor, Tensor]:
    """Truncated importance-sampling weights w = min(exp(log π_old − log π_rollout), C), detached.

    Returns the weights and a bool tensor marking where the cap was hit.
    """
    log_w = (old_logprobs - rollout_logprobs).detach().clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    raw = torch.exp(log_w)
    return raw.clamp(max=cap), raw > cap


ISLevel = Literal["token", "sequence", "geometric"]
ISMode = Literal["truncate", "mask"]


def importance_weights(
    old_logprobs: Tensor,
    rollout_logprobs: Tensor,
    mask: Tensor,
    level: ISLevel = "token",
    mode: ISMode = "truncate",
    cap: float = 2.0,
    low: float = 0.5,
) -> tuple[Tensor, Tensor]:
    """Off-policy correction weights of the rollout (behaviour) policy's tokens, [B, R], detached.

    The raw weight is ρ = π_old / π_rollout of each token (`token`), of the whole sequence (`sequence`:
    ρ_i = Π_t ρ_{i,t}, i.e. exp Σ_t log ρ_{i,t}), or its per-token geometric mean (`geometric`:
    exp(mean_t log ρ_{i,t})), broadcast to the sequence's tokens.

    `truncate` (TIS, Yao et al. 2025): w = min(ρ, C). `mask` (masked IS, as in IcePop / verl's rollout
    rejection): w = 1 where low ≤ ρ ≤ C, else 0 (the token or whole sequence gets no gradient).

    Returns the weights and a bool tensor marking the tokens that were truncated or masked.
    """
    log_rho = (old_logprobs - rollout_logprobs).detach().masked_fill(~mask, 0.0)
    if level != "token":
        total = log_rho.sum(dim=-1, keepdim=True)
        if level == "geometric":
            total = total / mask.sum(dim=-1, keepdim=True).clamp(min=1)
        log_rho = total.expand_as(log_rho)
    rho = torch.exp(log_rho.clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP))
    if mode == "truncate":
        hit = (rho > cap) & mask
        return rho.clamp(max=cap), hit
    hit = ((rho > cap) | (rho < low)) & mask
    return (~hit).to(rho.dtype), hit


def _ratio(logprobs: Tensor, old_logprobs: Tensor) -> tuple[Tensor, Tensor]:
    """(r, log r) with log r clamped to ±LOG_RATIO_CLAMP."""
    log_ratio = (logprobs - old_logprobs).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    return torch.exp(log_ratio), log_ratio
