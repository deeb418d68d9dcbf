"""Policy losses, in a registry named as in the literature, with aggregation, KL to a reference and TIS.

A registered loss is called as

    loss, metrics = get_loss("ppo_clip")(logprobs, old_logprobs, advantages, response_mask, config,
                                         ref_logprobs=None, rollout_logprobs=None)

with every tensor [B, R] over the response tokens. Symbols as in the papers: r = π_θ / π_θ_old is the token
importance ratio, computed in log space as exp(log π_θ − log π_θ_old); Â the (token-level) advantage.

What the wrapper (`PolicyLoss`) does around each paper's token-level surrogate ℓ_{i,t}:
    1. positions where `response_mask` is 0 (tool output, observations, user turns, padding) are replaced by
       constants before anything is computed, so they get *exactly* zero gradient, even if they hold inf/NaN;
    2. truncated importance sampling (TIS, Yao et al. 2025, "Your efficient RL framework secretly brings you
       off-policy RL training"): ℓ_{i,t} ← min(exp(log π_old − log π_rollout), C) · ℓ_{i,t}, the weight detached,
       correcting the mismatch between the trainer's and the rollout engine's probabilities;
    3. aggregation over tokens (`aggregate`): token-mean, seq-mean-token-sum, seq-mean-token-mean or Dr. GRPO's
       seq-mean-token-sum-norm; each loss has its paper's default, `PolicyLossConfig.loss_agg_mode` overrides it;
    4. optional KL penalty to a frozen reference, `kl_coef · aggregate(k(log π_θ, log π_ref))`, k ∈ {k1, k2, k3};
    5. optional entropy bonus, `− entropy_coef · aggregate(H(π_θ(· | prefix)))`, aggregated like the loss.

Built-ins are named in `agentrl.trainer.registry.LOSSES`. Register a new loss with `@register_loss("name")` on a
token-level surrogate `(logprobs, old_logprobs, advantages, mask: bool, config) -> (per-token loss [B, R], metrics)`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import torch
from torch import Tensor

from agentrl.trainer.loss_terms import (  # re-exported: part of this module's API
    LOG_RATIO_CLAMP,
    AggMode,
    _ratio,
    aggregate,  # noqa: F401 (re-exported)
    kl_penalty,  # noqa: F401 (re-exported)
    masked_mean,
    tis_weights,  # noqa: F401 (re-exported)
)
from agentrl.trainer.policy_loss import (  # re-exported: part of this module's API
    DAPO_CLIP_HIGH,
    Metrics,
    PolicyLoss,
    PolicyLossConfig,
    Surrogate,
    SurrogateOut,
)
from agentrl.trainer.registry import LOSSES


def register_loss(name: str, *, default_agg: AggMode = "token-mean") -> Callable[[Surrogate], Surrogate]:
    """Decorator registering a token-level surrogate as the policy loss `name` (the function is unchanged; a
    name already taken is refused)."""

    def decorate(fn: Surrogate) -> Surrogate:
        LOSSES.add(name, PolicyLoss(name, fn, default_agg))
        return fn

    return decorate


def get_loss(name: str) -> PolicyLoss:
    """The policy loss registered under `name` (or the surrogate at a dotted path, wrapped).

    Raises:
        UserError: unknown name; the message lists the known ones.
    """
    return LOSSES.get(name)


def _default_agg(mode: AggMode) -> Callable[[Surrogate], Surrogate]:
    """Mark a built-in surrogate with its paper's aggregation (read when the registry wraps it)."""

    def mark(fn: Surrogate) -> Surrogate:
        fn.default_agg = mode  # type: ignore[attr-defined]
        return fn

    return mark


# --------------------------------------------------------------------------------------------- surrogates


def ppo_clip(logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor, cfg: PolicyLossConfig) -> SurrogateOut:
    """PPO clipped surrogate (Schulman et al. 2017, arXiv:1707.06347, Eq. 7), asymmetric as in DAPO.

        ℓ_t = −min(r_t Â_t, clip(r_t, 1 − ε_low, 1 + ε_high) Â_t)

    ε_high > ε_low is DAPO's "clip-higher" (Yu et al. 2025, arXiv:2503.14476, Eq. 10). Metrics: clipfrac
    (tokens where the clipped term is active) = clipfrac_high (r > 1 + ε_high, Â > 0) + clipfrac_low
    (r < 1 − ε_low, Â < 0); ppo_kl = mean(log π_old − log π_θ).
    """
    ratio, log_ratio = _ratio(logp, old_logp)
    return _clipped_surrogate(ratio, log_ratio, adv, mask, cfg.clip_low, cfg.eps_high)


def _clipped_surrogate(
    ratio: Tensor,
    log_ratio: Tensor,
    adv: Tensor,
    mask: Tensor,
    eps_low: float,
    eps_high: float,
) -> SurrogateOut:
    unclipped = -adv * ratio
    clipped = -adv * ratio.clamp(1.0 - eps_low, 1.0 + eps_high)
    f = ratio.dtype
    metrics: Metrics = {
        "clipfrac": masked_mean((clipped > unclipped).to(f), mask),
        "clipfrac_high": masked_mean(((ratio > 1.0 + eps_high) & (adv > 0)).to(f), mask),
        "clipfrac_low": masked_mean(((ratio < 1.0 - eps_low) & (adv < 0)).to(f), mask),
        "ppo_kl": masked_mean(-log_ratio, mask),
        "ratio_mean": masked_mean(ratio, mask),
    }
    return torch.maximum(unclipped, clipped), metrics


def dapo(logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor, cfg: PolicyLossConfig) -> SurrogateOut:
    """DAPO's policy loss (Yu et al. 2025, arXiv:2503.14476, Eq. 8): `ppo_clip` with clip-higher
    (ε_high = 0.28 unless `clip_high` is set) aggregated token-mean. Pair it with `sampling.py` (dynamic sampling,
    overlong penalty) and the `grpo` advantage for the full recipe.
    """
    high = DAPO_CLIP_HIGH if cfg.clip_high is None else cfg.clip_high
    return ppo_clip(logp, old_logp, adv, mask, replace(cfg, clip_high=high))


def dual_clip(logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor, cfg: PolicyLossConfig) -> SurrogateOut:
    """Dual-clip PPO (Ye et al. 2020, "Mastering Complex Control in MOBA Games", arXiv:1912.09729, Eq. 5).

        ℓ_t = ℓ^{ppo_clip}_t                          if Â_t ≥ 0
        ℓ_t = min(ℓ^{ppo_clip}_t, −c · Â_t)           if Â_t < 0      (c > 1, e.g. 3)

    For Â < 0 and a huge ratio, the PPO term −r Â is unbounded; the dual clip caps the loss at c·|Â| (zero
    gradient there). Metric dual_clipfrac: tokens where the cap is active.
    """
    ratio, log_ratio = _ratio(logp, old_logp)
    base, metrics = _clipped_surrogate(ratio, log_ratio, adv, mask, cfg.clip_low, cfg.eps_high)
    cap = -cfg.dual_clip_c * adv
    negative = adv < 0
    metrics["dual_clipfrac"] = masked_mean((negative & (base > cap)).to(ratio.dtype), mask)
    return torch.where(negative, torch.minimum(base, cap), base), metrics


def cispo(logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor, cfg: PolicyLossConfig) -> SurrogateOut:
    """CISPO (MiniMax-M1, arXiv:2506.13585, Eq. 4–5): clip the IS weight, not the update.

        ℓ_t = −sg(r̂_t) · Â_t · log π_θ(y_t),   r̂_t = clip(r_t, 1 − ε_low, 1 + ε_high)

    Every token keeps a gradient (scaled by the detached, clipped weight), unlike PPO's clip that zeroes it.
    MiniMax-M1 sets no lower bound (a large ε_low, e.g. clip_low=1.0) and tunes only ε_high; default
    aggregation token-mean, as in the paper. clipfrac: tokens whose weight was clipped.
    """
    ratio, log_ratio = _ratio(logp, old_logp)
    weight = ratio.clamp(1.0 - cfg.clip_low, 1.0 + cfg.eps_high).detach()
    f = ratio.dtype
    metrics: Metrics = {
        "clipfrac": masked_mean((ratio.detach() != weight).to(f), mask),
        "ppo_kl": masked_mean(-log_ratio, mask),
        "ratio_mean": masked_mean(ratio, mask),
    }
    return -weight * adv * logp, metrics


@_default_agg("seq-mean-token-mean")
def gspo(logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor, cfg: PolicyLossConfig) -> SurrogateOut:
    """GSPO-token (Zheng et al. 2025, "Group Sequence Policy Optimization", arXiv:2507.18071, Eq. 7, 13–14).

        s_i     = exp( (1/|y_i|) Σ_t log(π_θ(y_{i,t}) / π_θ_old(y_{i,t})) )       (sequence-level ratio)
        s_{i,t} = sg[s_i] · π_θ(y_{i,t}) / sg[π_θ(y_{i,t})]                        (value s_i, token gradient)
        ℓ_{i,t} = −min(s_{i,t} Â_{i,t}, clip(s_{i,t}, 1 − ε_low, 1 + ε_high) Â_{i,t})

    With ε = (seq_clip_low, seq_clip_high) and seq-mean-token-mean aggregation; when Â_{i,t} = Â_i this has
    exactly GSPO's gradient (Eq. 11), and clipping acts on whole sequences.
    Metrics: clipfrac (tokens), seq_clipfrac (sequences), seq_ratio_mean.
    """
    counts = mask.sum(-1).clamp(min=1).to(logp.dtype)
    log_s = (torch.where(mask, logp - old_logp, 0.0).sum(-1) / counts).detach()
    log_s_tok = (logp - logp.detach() + log_s[:, None]).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    s_tok = torch.exp(log_s_tok)
    loss, metrics = _clipped_surrogate(s_tok, log_s_tok, adv, mask, cfg.seq_clip_low, cfg.seq_clip_high)
    valid = mask.any(-1)
    clipped_tokens = torch.where(mask, _clip_flag(s_tok.detach(), adv, cfg), 0.0)
    metrics["seq_clipfrac"] = masked_mean((clipped_tokens.sum(-1) > 0).to(loss.dtype), valid)
    metrics["seq_ratio_mean"] = masked_mean(torch.exp(log_s), valid)
    return loss, metrics


def _clip_flag(ratio: Tensor, adv: Tensor, cfg: PolicyLossConfig) -> Tensor:
    high = (ratio > 1.0 + cfg.seq_clip_high) & (adv > 0)
    low = (ratio < 1.0 - cfg.seq_clip_low) & (adv < 0)
    return (high | low).to(ratio.dtype)


@_default_agg("seq-mean-token-mean")
def sapo(logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor, cfg: PolicyLossConfig) -> SurrogateOut:
    """SAPO (Gao et al. 2025, "Soft Adaptive Policy Optimization", arXiv:2511.20347; verl's `sapo`).

        f_{i,t}(r) = (4 / τ_{i,t}) · σ(τ_{i,t} (r − 1)),   τ_{i,t} = τ_pos if Â_{i,t} > 0 else τ_neg
        ℓ_{i,t}    = −f_{i,t}(r_{i,t}) · Â_{i,t}

    A smooth, temperature-controlled gate replaces the hard clip: the gradient is w · r · Â · ∇log π with
    w = 4 σ(τ(r−1)) (1 − σ(τ(r−1))), which is 1 on-policy (r = 1) and decays smoothly off-policy (faster for
    larger τ; τ_neg > τ_pos damps negative updates more). Default aggregation seq-mean-token-mean, as in the
    paper's objective. Metrics: gate_weight_mean (mean w), clipfrac = 0 (there is no hard clip).
    """
    ratio, log_ratio = _ratio(logp, old_logp)
    tau = torch.full_like(ratio, cfg.tau_neg).masked_fill(adv > 0, cfg.tau_pos)
    p = torch.sigmoid(tau * (ratio - 1.0))
    gate = p * (4.0 / tau)
    metrics: Metrics = {
        "clipfrac": torch.zeros((), dtype=ratio.dtype, device=ratio.device),
        "gate_weight_mean": masked_mean((4.0 * p * (1.0 - p)).detach(), mask),
        "ppo_kl": masked_mean(-log_ratio, mask),
        "ratio_mean": masked_mean(ratio, mask),
    }
    return -gate * adv, metrics
