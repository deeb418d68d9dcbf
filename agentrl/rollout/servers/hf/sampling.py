"""Batched next-token selection with per-request sampling parameters.

Logprobs are the log-softmax of the raw model logits (fp32, before temperature, top-k or top-p), taken at the
chosen token, like vLLM's default: they match a teacher-forced forward pass of the same model.
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
    logprobs = torch.log_softmax(logits, dim=-1)
    rows = [i for i, r in enumerate(reqs) if r.sampling.temperature > 0]
    if len(rows) == len(reqs):
        tokens = _sample_rows(logits, reqs)
    else:
        tokens = logits.argmax(dim=-1)
        if rows:
            tokens[rows] = _sample_rows(logits[rows], [reqs[i] for i in rows])
    chosen = logprobs.gather(1, tokens[:, None]).squeeze(1)
    top = _top_logprobs(logprobs, [r.top_logprobs for r in reqs])
    return SampleOutput(tokens.tolist(), chosen.tolist(), top)


def _sample_rows(logits: torch.Tensor, reqs: Sequence[GenRequest]) -> torch.Tensor:
    """Temperature, top-k, top-p, then one inverse-CDF draw per row from that request's generator.

    One uniform number per row (not one per vocabulary entry, as `torch.multinomial` draws) keeps seeded
    sampling cheap and independent of the other rows in the batch.
    """
    temps = torch.tensor([r.sampling.temperature for r in reqs], dtype=logits.dtype, device=logits.device)
    scores = logits / temps[:, None]
    scores = apply_top_k(scores, [r.sampling.top_k for r in reqs])
    scores = apply_top_p(scores, [r.sampling.top_p for r in reqs])
    cdf = torch.softmax(scores, dim=-1).double().cumsum(dim=-1)
    uniforms = torch.cat(
        [torch.rand(1, generator=r.generator, dtype=torch.float64, device=logits.device) for r in reqs]
    )
    picks = torch.searchsorted(cdf, (uniforms * cdf[:, -1])[:, None], right=True).squeeze(1)
    return picks.clamp_(max=logits.shape[-1] - 1)


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
