"""Run the prompt prefix every row of a micro-batch shares (a system prompt) once, not once per row, and a whole
prompt that several rows repeat (a GRPO group's samples, gym turns from one state) once, not once per repeat.

On a CPU a training row costs about the same per token whether the token is the reply's or the prompt's, and a
multi-turn task with a short state per turn (gym: one row per turn) spends most of each row on the same system
prompt. Here the prefix runs once as a batch of one, its keys and values are repeated for every row (gradients
flow back through them), and the rows' remainders run on top; repeated prompts likewise run once and their keys
and values are indexed out to their rows. The logprobs and gradients are those of the full rows (tested);
`trainer.share_prompt_prefix` turns it on.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

import torch

MIN_SHARED_TOKENS = 16
"""A shorter common prefix is not worth a second forward call."""


def common_prefix(input_ids: torch.Tensor, attention_mask: torch.Tensor, prompt_len: int) -> int:
    """The number of leading real tokens every row shares, capped so that each row keeps at least its last
    prompt token outside the prefix (the logits that predict its first response token come from there).

    Rows are left-padded to `prompt_len`; 0 when there is one row.
    """
    if input_ids.shape[0] < 2:
        return 0
    firsts = attention_mask.int().argmax(dim=1)
    cap = prompt_len - 1 - int(firsts.max())
    if cap <= 0:
        return 0
    # each row's first `cap` real tokens, compared with row 0's, all rows at once (one device sync, not one a row)
    windows = input_ids.gather(1, firsts[:, None] + torch.arange(cap, device=input_ids.device))
    differs = (windows != windows[:1]).any(dim=0)
    return int(differs.int().argmax()) if bool(differs.any()) else cap


def forward_with_shared_prefix(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    position_ids: torch.Tensor,
    shared: int,
    logits_to_keep: int,
) -> Any:
    """`model(...)` over left-padded rows whose first `shared` real tokens are the same, with that prefix run once.

    The rows' remainders keep their columns (a row whose prompt starts later has its prefix columns masked), so the
    output's last `logits_to_keep` logits line up with those of a plain forward over the rows.
    """
    _, with_cache = new_cache(model)
    out, _ = prefix_once(model, input_ids, attention_mask, position_ids, shared, with_cache, logits_to_keep)
    return out


def distinct_prompts(
    input_ids: torch.Tensor, attention_mask: torch.Tensor, prompt_len: int
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Where rows repeat a prompt (GRPO's samples of one prompt, gym turns from one state): the first row of each
    distinct prompt [U] and each row's index into those [B]. A prompt here is all of it but its last token, the one
    whose logits predict the first response token. None when every row's prompt is its own (or one is a single
    token).

    Rows are left-padded to `prompt_len`.
    """
    head = prompt_len - 1
    rows = input_ids.shape[0]
    if rows < 2 or head < 1 or not bool(attention_mask[:, :head].any(dim=1).all()):
        return None
    key = input_ids[:, :head].masked_fill(attention_mask[:, :head] == 0, -1)
    _, inverse = torch.unique(key, dim=0, return_inverse=True)
    count = int(inverse.max()) + 1
    if count == rows:
        return None
    order = torch.arange(rows, device=inverse.device)
    firsts = torch.full((count,), rows, device=inverse.device).scatter_reduce(0, inverse, order, reduce="amin")
    return firsts, inverse


def forward_with_shared_prompts(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    position_ids: torch.Tensor,
    prompt_len: int,
    prompts: tuple[torch.Tensor, torch.Tensor],
    logits_to_keep: int,
) -> Any:
    """`model(...)` over left-padded rows that repeat prompts (`distinct_prompts`): each distinct prompt runs once
    (and the prefix all of them share, once for all), its keys and values are repeated for each of its rows, and
    the rows' last prompt token and responses run on top. The output's last `logits_to_keep` logits (at most the
    columns from the last prompt token on) line up with those of a plain forward over the rows.
    """
    firsts, row_prompt = prompts
    head = prompt_len - 1
    ids, mask, positions = (t[firsts, :head] for t in (input_ids, attention_mask, position_ids))
    cache, with_cache = new_cache(model)
    shared = common_prefix(ids, mask, head + 1)  # the distinct prompts' own common prefix (a system prompt)
    if shared >= MIN_SHARED_TOKENS:
        _, cached = prefix_once(model, ids, mask, positions, shared, with_cache, 1)
    else:
        start = int(mask.int().argmax(dim=1).min())
        model(input_ids=ids[:, start:], attention_mask=mask[:, start:], position_ids=positions[:, start:],
              use_cache=True, logits_to_keep=1, **with_cache)  # fmt: skip
        cached = mask[:, start:]
    cache.batch_select_indices(row_prompt)
    return model(
        input_ids=input_ids[:, head:],
        attention_mask=torch.cat([cached[row_prompt], attention_mask[:, head:]], dim=1),
        position_ids=position_ids[:, head:],
        use_cache=True,
        logits_to_keep=logits_to_keep,
        **with_cache,
    )


def new_cache(model: torch.nn.Module) -> tuple[Any, dict[str, Any]]:
    """An empty `DynamicCache`, and the keyword argument that passes it to `model`'s forward."""
    from transformers import DynamicCache

    cache = DynamicCache(config=getattr(model, "config", None))
    return cache, {cache_argument(model): cache}


def prefix_once(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    position_ids: torch.Tensor,
    shared: int,
    with_cache: dict[str, Any],
    logits_to_keep: int,
) -> tuple[Any, torch.Tensor]:
    """The rows' first `shared` real tokens run once, then the rest of their columns on top, into the cache in
    `with_cache`; the output and the attention mask over every cached column."""
    rows = input_ids.shape[0]
    firsts = attention_mask.int().argmax(dim=1)
    start = int(firsts.min())
    prefix = input_ids[:1, int(firsts[0]) : int(firsts[0]) + shared]
    cache = next(iter(with_cache.values()))
    model(input_ids=prefix, use_cache=True, logits_to_keep=1, **with_cache)
    cache.batch_repeat_interleave(rows)
    columns = torch.arange(start + shared, input_ids.shape[1], device=input_ids.device)
    in_prefix = columns[None, :] < (firsts[:, None] + shared)  # columns of each row's own copy of the prefix
    rest_mask = attention_mask[:, start + shared :].masked_fill(in_prefix, 0)
    full_mask = torch.cat([attention_mask.new_ones(rows, shared), rest_mask], dim=1)
    out = model(
        input_ids=input_ids[:, start + shared :],
        attention_mask=full_mask,
        position_ids=position_ids[:, start + shared :],
        use_cache=True,
        logits_to_keep=logits_to_keep,
        **with_cache,
    )
    return out, full_mask


def cache_argument(model: torch.nn.Module) -> str:
    """`cache` (transformers ≥ 5.2x, where `past_key_values` is deprecated) or `past_key_values` (before)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # a peft model's own forward
    return _cache_argument_of(type(base))


@functools.cache
def _cache_argument_of(model_class: type) -> str:
    # once per class: the hf server asks at every decode step
    return "cache" if "cache" in inspect.signature(model_class.forward).parameters else "past_key_values"
