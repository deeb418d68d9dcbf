"""Teacher-forced forward passes over a padded batch's response tokens: their logprobs, the policy's entropy
(over the vocabulary, or over named choices at each turn's first token), run only over the columns the rows fill
and, with `share_prefix`, with the rows' common prompt prefix run once."""

from __future__ import annotations

import torch

from agentrl.shared_prefix import SharingPlan
from agentrl.trainer.batch import PaddedBatch
from agentrl.trainer.choices import choice_entropy, turn_first_tokens
from agentrl.trainer.fsdp_gather import keep_gathered_through_backward


def response_logprobs(
    model: torch.nn.Module,
    batch: PaddedBatch,
    rows: slice,
    dtype: torch.dtype,
    entropy_out: list[float] | None = None,
    share_prefix: bool = False,
) -> torch.Tensor:
    """log π(response token | prefix) for `rows` of `batch`, [b, R] in float32, 0 on padding.

    With `entropy_out`, the mean entropy of the policy over the rows' real response tokens is appended to it.
    `share_prefix`: run the prompt prefix all the rows share once (the same result, less compute).
    """
    all_logp, logp, real = _response_forward(model, batch, rows, dtype, share_prefix)
    if entropy_out is not None:
        entropy_out.append(_mean_entropy(all_logp, real))
    return _pad_to_batch(logp * real, batch)


def response_logprobs_and_entropy(
    model: torch.nn.Module, batch: PaddedBatch, rows: slice, dtype: torch.dtype, share_prefix: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """`response_logprobs`, and the policy's entropy H(π(· | prefix)) at each response position [b, R], both
    with their gradient, 0 on padding. The entropy keeps a [b, R, V] product for the backward pass."""
    all_logp, logp, real = _response_forward(model, batch, rows, dtype, share_prefix)
    entropy = -(all_logp.exp() * all_logp).sum(-1)
    return _pad_to_batch(logp * real, batch), _pad_to_batch(entropy * real, batch)


def response_logprobs_and_choice_entropy(
    model: torch.nn.Module,
    batch: PaddedBatch,
    rows: slice,
    dtype: torch.dtype,
    choice_ids: list[int],
    entropy_out: list[float] | None = None,
    share_prefix: bool = False,
    weighted: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, float]:
    """`response_logprobs`; the entropy over `choice_ids` (renormalized; `weighted`: times the choices'
    probability) at the first generated token of each turn, 0 elsewhere, [b, R] with its gradient; and that
    entropy's mean over the turns. With `entropy_out`, the vocabulary-wide mean entropy is appended to it, as
    `response_logprobs` does."""
    all_logp, logp, real = _response_forward(model, batch, rows, dtype, share_prefix)
    if entropy_out is not None:
        entropy_out.append(_mean_entropy(all_logp, real))
    firsts = turn_first_tokens(batch.response_mask[rows, : logp.shape[1]]).to(logp.dtype) * real
    entropy = choice_entropy(all_logp, choice_ids, weighted) * firsts
    mean = float(entropy.detach().sum() / firsts.sum()) if firsts.any() else 0.0
    return _pad_to_batch(logp * real, batch), _pad_to_batch(entropy, batch), mean


def _response_forward(
    model: torch.nn.Module, batch: PaddedBatch, rows: slice, dtype: torch.dtype, share_prefix: bool = False
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The log-distributions [b, R', V] at the response positions of `rows`, the response tokens' logprobs
    [b, R'] and their real-token mask, over the filled columns only (R' ≤ R). `share_prefix`: run the prompt
    prefix all the rows share once (`agentrl.shared_prefix`)."""
    # Only the columns some row of `rows` fills are run: the batch is padded to its longest row, and a
    # micro-batch of short rows would otherwise pay for that row's length in padding.
    start, end = _filled_columns(batch.attention_mask[rows], batch.prompt_len)
    input_ids = batch.input_ids[rows, start:end]
    p = batch.prompt_len - start
    mask, positions = batch.attention_mask[rows, start:end], batch.position_ids[rows, start:end]
    # The LM head runs only where a response token is predicted: over a long prompt it was most of the logits'
    # compute and memory (vocabulary-sized rows that were sliced off unused).
    keep = input_ids.shape[1] - p + 1
    plan = SharingPlan.of(input_ids, mask, p) if share_prefix else SharingPlan()
    if share_prefix and not same_on_every_rank(plan.way, input_ids.device):
        plan = SharingPlan()  # the ranks' rows differ: all run plainly
    if plan.way and torch.is_grad_enabled():
        keep_gathered_through_backward(model)  # a layer runs more than once: its backward passes it as often
    with torch.autocast(input_ids.device.type, dtype=dtype, enabled=dtype != torch.float32):
        out = plan.forward(model, input_ids, mask, positions, p, keep)
    all_logp = torch.log_softmax(_tempered(out.logits[:, :-1, :].float(), batch, rows), dim=-1)
    logp = all_logp.gather(-1, input_ids[:, p:].unsqueeze(-1)).squeeze(-1)
    real = batch.attention_mask[rows, batch.prompt_len : end].to(logp.dtype)
    return all_logp, logp, real


def same_on_every_rank(way: int, device: torch.device) -> bool:
    """Whether every rank runs its micro-batch the same way (`SharingPlan.way`). Under FSDP each forward call
    gathers the weights, so ranks must make as many calls: where their rows differ, all run plain forwards. True
    with one rank."""
    import torch.distributed as dist

    if not dist.is_initialized() or dist.get_world_size() == 1:
        return True
    ways = torch.tensor([way, -way], device=device)
    dist.all_reduce(ways, op=dist.ReduceOp.MAX)  # the highest way, and minus the lowest
    return int(ways[0]) == -int(ways[1])


def _tempered(logits: torch.Tensor, batch: PaddedBatch, rows: slice) -> torch.Tensor:
    """Logits [b, R', V] divided by the temperature each response token was sampled at: the logprobs are then
    of the distribution the rollout server sampled from (as verl divides by the rollout temperature)."""
    if batch.temperatures is None:
        return logits
    temps = batch.temperatures[rows, : logits.shape[1]].to(logits.device)
    return logits / temps.unsqueeze(-1)


def _pad_to_batch(values: torch.Tensor, batch: PaddedBatch) -> torch.Tensor:
    """[b, R'] response values padded with 0 to the batch's response width R."""
    width = batch.input_ids.shape[1] - batch.prompt_len
    return torch.nn.functional.pad(values, (0, width - values.shape[1]))


def row_spans(attention_mask: torch.Tensor, prompt_len: int) -> list[tuple[int, int]]:
    """Each row's `_filled_columns`, computed for all rows at once (one device sync, not one per row)."""
    width = attention_mask.shape[1]
    real = attention_mask.bool()
    filled = real.any(dim=1)
    first = torch.where(filled, real.int().argmax(dim=1), width)
    last = torch.where(filled, width - 1 - real.int().flip(1).argmax(dim=1), prompt_len)
    starts = first.clamp(max=prompt_len - 1)
    ends = torch.maximum(last + 1, torch.full_like(last, prompt_len + 1)).clamp(max=width)
    return list(zip(starts.tolist(), ends.tolist(), strict=True))


def _filled_columns(attention_mask: torch.Tensor, prompt_len: int) -> tuple[int, int]:
    """[start, end) of the columns where some row has a real token; always the prompt's last column and the
    first response column (left-padded prompts end at `prompt_len`, right-padded responses start there)."""
    filled = attention_mask.any(dim=0).nonzero().flatten().tolist()
    start = min(filled[0], prompt_len - 1) if filled else prompt_len - 1
    end = max(filled[-1] + 1, prompt_len + 1) if filled else prompt_len + 1
    return start, min(end, attention_mask.shape[1])


@torch.no_grad()
def _mean_entropy(all_logp: torch.Tensor, real: torch.Tensor) -> float:
    """Mean entropy over the real tokens of log-distributions [b, R, V], one row at a time (bounded memory)."""
    total = sum(float((-(row.exp() * row).sum(-1) * mask).sum()) for row, mask in zip(all_logp, real, strict=True))
    return total / max(float(real.sum()), 1.0)
