"""A policy loss: a paper's token-level surrogate wrapped with masking, the off-policy correction, aggregation,
KL and the entropy bonus (`PolicyLoss`), and the hyper-parameters every loss reads (`PolicyLossConfig`). The
surrogates themselves, and their registration, are in `agentrl.trainer.losses`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import get_args

import torch
from torch import Tensor

from agentrl.errors import UserError
from agentrl.trainer.loss_terms import (
    AggMode,
    ISLevel,
    ISMode,
    KLType,
    aggregate,
    importance_weights,
    kl_penalty,
    masked_mean,
)

Metrics = dict[str, Tensor]
SurrogateOut = tuple[Tensor, Metrics]
Surrogate = Callable[[Tensor, Tensor, Tensor, Tensor, "PolicyLossConfig"], SurrogateOut]

DAPO_CLIP_HIGH = 0.28
"""ε_high recommended by DAPO (Yu et al. 2025, arXiv:2503.14476, §3.1)."""


@dataclass(frozen=True)
class PolicyLossConfig:
    """Hyper-parameters of the policy losses (one config serves every loss; each reads its own fields).

    Attributes:
        clip_low: ε_low, the ratio is clipped from below at 1 − ε_low (ppo_clip, dapo, dual_clip, cispo).
        clip_high: ε_high, clipped from above at 1 + ε_high (DAPO "clip-higher"); None: ε_low (symmetric PPO),
            except for `dapo`, where None means 0.28.
        dual_clip_c: c > 1, the dual-clip lower bound −c·Â for tokens with Â < 0 (Ye et al. 2020).
        seq_clip_low, seq_clip_high: GSPO's clipping range on the sequence ratio s_i (3e-4, 4e-4 in the paper).
        tau_pos, tau_neg: SAPO gate temperatures for Â > 0 and Â ≤ 0 (1.0 and 1.05 in the paper).
        loss_agg_mode: None: the loss's own (paper) default.
        norm_constant: the constant divisor of seq-mean-token-sum-norm (Dr. GRPO uses the max generation
            length); None: R, the padded response length of the batch.
        kl_coef: β, weight of the KL penalty to the reference (0: off; needs `ref_logprobs`).
        kl_type: k1 = log π_θ − log π_ref; k2 = ½ (log π_θ − log π_ref)²; k3 = π_ref/π_θ − log(π_ref/π_θ) − 1
            (Schulman 2020, "Approximating KL divergence"; k3 is GRPO's).
        tis_cap: C, the upper bound of the off-policy correction's weight; None: no correction (needs
            `rollout_logprobs` when set).
        is_level: the correction's weight per `token`, per `sequence` (product of the token ratios) or its
            `geometric` mean (see `loss_terms.importance_weights`).
        is_mode: `truncate` the weight at C (TIS), or `mask` the tokens / sequences whose weight leaves
            [is_mask_low, C] (masked IS).
        is_mask_low: lower bound of the masked-IS band.
        entropy_coef: weight of the entropy bonus (0: off; needs the per-token `entropy`).
    """

    clip_low: float = 0.2
    clip_high: float | None = None
    dual_clip_c: float = 3.0
    seq_clip_low: float = 3e-4
    seq_clip_high: float = 4e-4
    tau_pos: float = 1.0
    tau_neg: float = 1.05
    loss_agg_mode: AggMode | None = None
    norm_constant: float | None = None
    kl_coef: float = 0.0
    kl_type: KLType = "k3"
    tis_cap: float | None = None
    is_level: ISLevel = "token"
    is_mode: ISMode = "truncate"
    is_mask_low: float = 0.5
    entropy_coef: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.clip_low <= 1.0:
            raise UserError(f"clip_low must be in [0, 1], got {self.clip_low}")
        _check_bounds(0.0, clip_high=self.clip_high, seq_clip_low=self.seq_clip_low, kl_coef=self.kl_coef)
        _check_bounds(0.0, seq_clip_high=self.seq_clip_high)
        _check_bounds(0.0, strict=True, tau_pos=self.tau_pos, tau_neg=self.tau_neg, tis_cap=self.tis_cap)
        _check_bounds(0.0, strict=True, norm_constant=self.norm_constant)
        _check_bounds(1.0, strict=True, dual_clip_c=self.dual_clip_c)
        if self.loss_agg_mode is not None and self.loss_agg_mode not in get_args(AggMode):
            raise UserError(f"unknown loss_agg_mode {self.loss_agg_mode!r}; known: {', '.join(get_args(AggMode))}")
        _check_bounds(0.0, is_mask_low=self.is_mask_low, entropy_coef=self.entropy_coef)
        if self.tis_cap is not None and self.is_mode == "mask" and self.is_mask_low >= self.tis_cap:
            raise UserError(f"is_mask_low ({self.is_mask_low}) must be below tis_cap ({self.tis_cap})")
        if self.kl_type not in get_args(KLType):
            raise UserError(f"unknown kl_type {self.kl_type!r}; known: {', '.join(get_args(KLType))}")

    @property
    def eps_high(self) -> float:
        """ε_high actually used (clip_high, or clip_low when unset)."""
        return self.clip_low if self.clip_high is None else self.clip_high


def _check_bounds(low: float, *, strict: bool = False, **values: float | None) -> None:
    """Raise UserError unless each value (None: unset, skipped) is >= low (> low when strict)."""
    for key, value in values.items():
        if value is not None and (value <= low if strict else value < low):
            raise UserError(f"{key} must be {'>' if strict else '>='} {low}, got {value}")


# --------------------------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class PolicyLoss:
    """A registered policy loss: a paper's token-level surrogate plus masking, TIS, aggregation and KL."""

    name: str
    surrogate: Surrogate
    default_agg: AggMode

    def __call__(
        self,
        logprobs: Tensor,
        old_logprobs: Tensor,
        advantages: Tensor,
        response_mask: Tensor,
        config: PolicyLossConfig | None = None,
        *,
        ref_logprobs: Tensor | None = None,
        rollout_logprobs: Tensor | None = None,
        num_tokens: float | None = None,
        num_seqs: float | None = None,
        entropy: Tensor | None = None,
    ) -> tuple[Tensor, dict[str, float]]:
        """Scalar loss to minimize, and float metrics (pg_loss, clipfrac, ppo_kl, kl, tis_*, ...).

        Args:
            logprobs: log π_θ of the response tokens, with gradient.
            old_logprobs: log π_θ_old (the trainer's, before this update); detached here.
            advantages: token-level Â [B, R] (see `agentrl.trainer.advantages`); detached here.
            response_mask: 1 for tokens the policy generated; 0 for tool/observation tokens and padding.
            config: hyper-parameters; None: `PolicyLossConfig()`.
            ref_logprobs: log π_ref of a frozen reference; needed when `config.kl_coef > 0`, logged otherwise.
            rollout_logprobs: the rollout engine's logprobs; needed when `config.tis_cap` is set.
            num_tokens, num_seqs: mini-batch denominators for micro-batching (see `aggregate`).
            entropy: the policy's entropy at each response position [B, R], with gradient; needed when
                `config.entropy_coef > 0`.
        """
        cfg = config if config is not None else PolicyLossConfig()
        _check_inputs(logprobs, old_logprobs, advantages, response_mask, ref_logprobs, rollout_logprobs)
        mask = response_mask.bool()
        logp = logprobs.masked_fill(~mask, 0.0)
        old = old_logprobs.detach().masked_fill(~mask, 0.0)
        adv = advantages.detach().masked_fill(~mask, 0.0)
        pg_mat, metrics = self.surrogate(logp, old, adv, mask, cfg)
        if rollout_logprobs is not None:
            rollout = rollout_logprobs.detach().masked_fill(~mask, 0.0)
            metrics["rollout_logprob_abs_diff"] = masked_mean((old - rollout).abs(), mask)
            pg_mat = _apply_tis(pg_mat, old, rollout, mask, cfg, metrics)
        elif cfg.tis_cap is not None:
            raise UserError("tis_cap is set but no rollout_logprobs were passed; pass them or unset tis_cap")
        mode = cfg.loss_agg_mode or self.default_agg
        agg_kw = {"norm_constant": cfg.norm_constant, "num_tokens": num_tokens, "num_seqs": num_seqs}
        pg_loss = aggregate(pg_mat, mask, mode, **agg_kw)
        loss = pg_loss + _kl_term(logp, ref_logprobs, mask, mode, cfg, agg_kw, metrics)
        loss = loss - _entropy_bonus(entropy, mask, mode, cfg, agg_kw, metrics)
        metrics["pg_loss"] = pg_loss
        metrics["loss"] = loss
        return loss, {k: float(v.detach()) for k, v in metrics.items()}


def _apply_tis(
    pg_mat: Tensor,
    old: Tensor,
    rollout: Tensor,
    mask: Tensor,
    cfg: PolicyLossConfig,
    metrics: Metrics,
) -> Tensor:
    """Weight each token's surrogate by the off-policy correction π_old / π_rollout (truncated or masked).

    With π_old the policy before this update (recomputed once per batch, or this very forward) and π_rollout the
    behaviour policy that sampled the tokens, this is decoupled PPO (Fu et al. 2025, AReaL): the clipped ratio
    against the proximal policy, times the (truncated) importance weight of proximal over behaviour.
    """
    if cfg.tis_cap is None:
        return pg_mat
    weights, hit = importance_weights(
        old, rollout, mask, cfg.is_level, cfg.is_mode, cap=cfg.tis_cap, low=cfg.is_mask_low
    )
    metrics["tis_weight_mean"] = masked_mean(weights, mask)
    metrics["tis_weight_max"] = weights.masked_fill(~mask, 0.0).max() if mask.any() else weights.new_zeros(())
    share = masked_mean(hit.to(weights.dtype), mask)
    metrics["tis_clipfrac" if cfg.is_mode == "truncate" else "tis_maskfrac"] = share
    return pg_mat * weights


def _kl_term(
    logp: Tensor,
    ref_logprobs: Tensor | None,
    mask: Tensor,
    mode: AggMode,
    cfg: PolicyLossConfig,
    agg_kw: dict[str, float | None],
    metrics: Metrics,
) -> Tensor:
    """β · aggregate(k(log π_θ, log π_ref)); the KL is logged whenever a reference is given."""
    if ref_logprobs is None:
        if cfg.kl_coef > 0:
            raise UserError("kl_coef > 0 needs ref_logprobs (log-probs of the frozen reference policy)")
        return torch.zeros((), dtype=logp.dtype, device=logp.device)
    ref = ref_logprobs.detach().masked_fill(~mask, 0.0)
    kl = aggregate(kl_penalty(logp, ref, cfg.kl_type), mask, mode, **agg_kw)
    metrics["kl"] = kl
    return cfg.kl_coef * kl if cfg.kl_coef > 0 else torch.zeros_like(kl)


def _entropy_bonus(
    entropy: Tensor | None,
    mask: Tensor,
    mode: AggMode,
    cfg: PolicyLossConfig,
    agg_kw: dict[str, float | None],
    metrics: Metrics,
) -> Tensor:
    """entropy_coef · aggregate(H), subtracted from the loss: higher entropy lowers it."""
    if cfg.entropy_coef == 0:
        return torch.zeros((), device=mask.device)
    if entropy is None:
        raise UserError("entropy_coef > 0 needs the per-token entropy (PolicyEngine.train_step(entropy_grad=True))")
    bonus = aggregate(entropy.masked_fill(~mask, 0.0), mask, mode, **agg_kw)
    metrics["entropy_bonus"] = bonus
    return cfg.entropy_coef * bonus


def _check_inputs(*tensors: Tensor | None) -> None:
    shape = tensors[0].shape if tensors[0] is not None else None
    if shape is None or len(shape) != 2:
        raise ValueError(f"logprobs must be [B, R], got {None if shape is None else tuple(shape)}")
    for t in tensors[1:]:
        if t is not None and t.shape != shape:
            raise ValueError(f"every loss input must be [B, R] = {tuple(shape)}, got {tuple(t.shape)}")
