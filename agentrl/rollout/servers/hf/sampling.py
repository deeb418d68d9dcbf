"""Batched next-token selection with per-request sampling parameters.

Logprobs are of the distribution each token was drawn from (vLLM's `logprobs_mode=processed_logprobs`): the
log-softmax of the fp32 logits divided by the temperature, after top-k and top-p, taken at the chosen token. With
top-k and top-p off they match a teacher-forced forward pass at the same temperature (what the trainer computes);
greedy rows report the raw logits' log-softmax. Top logprobs are of the same distribution, floored at -9999 as
vLLM does (a truncated token's -inf is not valid JSON).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from agentrl.rollout.servers.hf.request import GenRequest, TopLogprobs


@dataclass
class SampleOutput:
    """The chosen token per row, its logprob, and the top-k alternatives for rows that asked."""

    token_ids: list[int]
    logprobs: list[float]
    top: list[TopLogprobs | None]


def sample_next(logits: torch.Tensor, reqs: Sequence[GenRequest]) -> SampleOutput:
    """Pick one token per row of `logits` [B, V] for the matching request in `reqs`."""
    logits = logits.float()
    rows = [i for i, r in enumerate(reqs) if r.sampling.temperature > 0]
    if len(rows) == len(reqs):
        scores = processed_scores(logits, reqs)
        tokens = _draw(scores, reqs)
    else:
        scores = logits.clone() if rows else logits  # greedy rows keep the raw logits: no copy for an all-greedy batch
        tokens = logits.argmax(dim=-1)
        if rows:
            scores[rows] = processed_scores(logits[rows], [reqs[i] for i in rows])
            tokens[rows] = _draw(scores[rows], [reqs[i] for i in rows])
    logprobs = torch.log_softmax(scores, dim=-1)
    chosen = logprobs.gather(1, tokens[:, None]).squeeze(1)
    top = _top_logprobs(logprobs.clamp(min=MIN_LOGPROB), [r.top_logprobs for r in reqs])
    return SampleOutput(tokens.tolist(), chosen.tolist(), top)


MIN_LOGPROB = -9999.0


def processed_scores(logits: torch.Tensor, reqs: Sequence[GenRequest]) -> torch.Tensor:
    """The scores each row samples from: logits / temperature, then top-k, then top-p (-inf where cut)."""
    temps = torch.tensor([r.sampling.temperature for r in reqs], dtype=logits.dtype, device=logits.device)
    scores = logits / temps[:, None]
    scores = apply_top_k(scores, [r.sampling.top_k for r in reqs])
    return apply_top_p(scores, [r.sampling.top_p for r in reqs])


def _draw(scores: torch.Tensor, reqs: Sequence[GenRequest]) -> torch.Tensor:
    """One inverse-CDF draw per row of `scores` from that request's generator.

    One uniform number per row (not one per vocabulary entry, as `torch.multinomial` draws) keeps seeded
    sampling cheap and independent of the other rows in the batch.
    """
    cdf = torch.softmax(scores, dim=-1).double().cumsum(dim=-1)
    uniforms = torch.cat(
        [torch.rand(1, generator=r.generator, dtype=torch.float64, device=scores.device) for r in reqs]
    )
    picks = torch.searchsorted(cdf, (uniforms * cdf[:, -1])[:, None], right=True).squeeze(1)
    return picks.clamp_(max=scores.shape[-1] - 1)


def apply_top_k(scores: torch.Tensor, ks: Sequence[int]) -> torch.Tensor:
    """Mask all but the `k` highest scores per row; k <= 0 (or >= vocab) leaves the row unchanged."""
    vocab = scores.shape[-1]
    if all(k <= 0 or k >= vocab for k in ks):
        return scores
    kept = torch.tensor([k if 0 < k < vocab else vocab for k in ks], device=scores.device)
    top = scores.topk(int(kept.max()), dim=-1).values
    threshold = top.gather(1, (kept - 1)[:, None])
    return scores.masked_fill(scores < threshold, float("-inf"))


def apply_top_p(scores: torch.Tensor, ps: Sequence[float]) -> torch.Tensor:
    """Nucleus filtering: keep the smallest set of tokens whose probability mass reaches `p` (at least one)."""
    if all(p >= 1.0 for p in ps):
        return scores
    p = torch.tensor(ps, dtype=scores.dtype, device=scores.device)[:, None]
    sorted_scores, order = scores.sort(dim=-1, descending=True)
    probs = sorted_scores.softmax(dim=-1)
    mass_before = probs.cumsum(dim=-1) - probs
    sorted_scores = sorted_scores.masked_fill(mass_before >= p, float("-inf"))
    return torch.empty_like(scores).scatter_(1, order, sorted_scores)


def _top_logprobs(logprobs: torch.Tensor, ks: Sequence[int]) -> list[TopLogprobs | None]:
    """The `k` most likely tokens and their logprobs, for rows with k > 0."""
    kmax = max(ks, default=0)
    if kmax <= 0:
        return [None] * len(ks)
    values, indices = logprobs.topk(min(kmax, logprobs.shape[-1]), dim=-1)
    values_l, indices_l = values.tolist(), indices.tolist()
    return [list(zip(indices_l[i][:k], values_l[i][:k], strict=True)) if k > 0 else None for i, k in enumerate(ks)]
