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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from transformers.cache_utils import Cache, DynamicCache, DynamicLayer
from transformers.modeling_layers import GradientCheckpointingLayer

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
    output's last `logits_to_keep` logits line up with those of a plain forward over the rows. Each forward gets a
    cache of its own (`StageCache`), so a model with gradient checkpointing replays its layers exactly.
    """
    out, _, _ = prefix_once(model, input_ids, attention_mask, position_ids, shared, StageCache.first(model),
                            logits_to_keep, restage=StageCache.following)  # fmt: skip
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
    shared: int = 0,
) -> Any:
    """`model(...)` over left-padded rows that repeat prompts (`distinct_prompts`): each distinct prompt runs once
    (and `shared`, the prefix all of them share (`prompts_prefix`), once for all when it is worth it), its keys and
    values are repeated for each of its rows, and the rows' last prompt token and responses run on top. The output's
    last `logits_to_keep` logits (at most the columns from the last prompt token on) line up with those of a plain
    forward over the rows.
    """
    firsts, row_prompt = prompts
    head = prompt_len - 1
    ids, mask, positions = (t[firsts, :head] for t in (input_ids, attention_mask, position_ids))
    if shared >= MIN_SHARED_TOKENS:
        _, cached, cache = prefix_once(
            model, ids, mask, positions, shared, StageCache.first(model), 1, restage=StageCache.following
        )
    else:
        start = int(mask.int().argmax(dim=1).min())
        cache = StageCache.first(model)
        model(input_ids=ids[:, start:], attention_mask=mask[:, start:], position_ids=positions[:, start:],
              use_cache=True, logits_to_keep=1, **{cache_argument(model): cache})  # fmt: skip
        cached = mask[:, start:]
    return model(
        input_ids=input_ids[:, head:],
        attention_mask=torch.cat([cached[row_prompt], attention_mask[:, head:]], dim=1),
        position_ids=position_ids[:, head:],
        use_cache=True,
        logits_to_keep=logits_to_keep,
        **{cache_argument(model): StageCache.following(cache, row_prompt)},
    )


def prompts_prefix(
    input_ids: torch.Tensor, attention_mask: torch.Tensor, prompt_len: int, prompts: tuple[torch.Tensor, torch.Tensor]
) -> int:
    """The prefix the distinct prompts of `distinct_prompts` share (a system prompt), in tokens."""
    firsts, head = prompts[0], prompt_len - 1
    return common_prefix(input_ids[firsts, :head], attention_mask[firsts, :head], head + 1)


@dataclass
class SharingPlan:
    """How one micro-batch's forward runs: `way` 0 plainly, 1 with the rows' common prefix once (`shared` tokens),
    2 with each repeated prompt once (`prompts`), 3 as 2 with the distinct prompts' own common prefix once. Each way
    makes its own number of forward calls (1, 2, 2, 3): under FSDP the ranks must agree on it, or all run plainly."""

    way: int = 0
    shared: int = 0
    prompts: tuple[torch.Tensor, torch.Tensor] | None = None

    @classmethod
    def of(cls, input_ids: torch.Tensor, attention_mask: torch.Tensor, prompt_len: int) -> SharingPlan:
        """The cheapest exact way for these left-padded rows."""
        prompts = distinct_prompts(input_ids, attention_mask, prompt_len)
        if prompts is not None:
            shared = prompts_prefix(input_ids, attention_mask, prompt_len, prompts)
            return cls(3, shared, prompts) if shared >= MIN_SHARED_TOKENS else cls(2, 0, prompts)
        shared = common_prefix(input_ids, attention_mask, prompt_len)
        return cls(1, shared) if shared >= MIN_SHARED_TOKENS else cls()

    def forward(
        self,
        model: torch.nn.Module,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        position_ids: torch.Tensor,
        prompt_len: int,
        logits_to_keep: int,
    ) -> Any:
        """`model(...)` over the rows, run this plan's way."""
        if self.prompts is not None:
            return forward_with_shared_prompts(
                model, input_ids, attention_mask, position_ids, prompt_len, self.prompts, logits_to_keep, self.shared
            )
        if self.way == 1:
            return forward_with_shared_prefix(
                model, input_ids, attention_mask, position_ids, self.shared, logits_to_keep
            )
        return model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=False,
                     logits_to_keep=logits_to_keep)  # fmt: skip


def new_cache(model: torch.nn.Module) -> tuple[Any, dict[str, Any]]:
    """An empty `DynamicCache`, and the keyword argument that passes it to `model`'s forward."""
    cache = DynamicCache(config=getattr(model, "config", None))
    return cache, {cache_argument(model): cache}


Restage = Callable[[Any, torch.Tensor], Any]
"""Given the cache after one forward and a row index, the cache the next forward runs on (its rows: the index's)."""


def in_place(cache: Any, rows: torch.Tensor) -> Any:
    """The same `DynamicCache`, its rows selected: decoding goes on from it (the hf server)."""
    cache.batch_select_indices(rows)
    return cache


def prefix_once(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    position_ids: torch.Tensor,
    shared: int,
    cache: Any,
    logits_to_keep: int,
    restage: Restage = in_place,
) -> tuple[Any, torch.Tensor, Any]:
    """The rows' first `shared` real tokens run once into `cache`, then the rest of their columns on top (in the
    cache `restage` gives). Returns the output, the attention mask over every cached column and the cache."""
    rows = input_ids.shape[0]
    firsts = attention_mask.int().argmax(dim=1)
    start = int(firsts.min())
    prefix = input_ids[:1, int(firsts[0]) : int(firsts[0]) + shared]
    model(input_ids=prefix, use_cache=True, logits_to_keep=1, **{cache_argument(model): cache})
    cache = restage(cache, torch.zeros(rows, dtype=torch.long, device=input_ids.device))
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
        **{cache_argument(model): cache},
    )
    return out, full_mask, cache


class StageLayer(DynamicLayer):
    """One layer's keys and values for one forward: those of the forwards before it (`past`, never changed) and,
    once the forward ran, the new ones after them. A layer replayed by gradient checkpointing's backward gets the
    same keys again, where a growing cache would append its tokens a second time."""

    def __init__(self, past: tuple[torch.Tensor, torch.Tensor] | None = None):
        super().__init__()
        self.past = past
        if past is not None:
            self.keys, self.values = past
            self.is_initialized, self.device = True, past[0].device

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if self.past is None:
            self.keys, self.values = key_states, value_states
        else:
            self.keys = torch.cat([self.past[0], key_states], dim=-2)
            self.values = torch.cat([self.past[1], value_states], dim=-2)
        self.is_initialized, self.device = True, key_states.device
        return self.keys, self.values


class StageCache(DynamicCache):
    """The cache of one training forward of a shared prefix: what the forwards before it computed, read only, and
    what this one adds. The next forward gets a new one (`following`), so every forward's layers can be replayed
    (gradient checkpointing) and gradients reach the shared keys and values through each row's copy."""

    def __init__(self, layers: list[StageLayer]):
        Cache.__init__(self, layers=layers)

    @classmethod
    def first(cls, model: torch.nn.Module) -> StageCache:
        """An empty cache with a layer for each of `model`'s decoder layers."""
        config = getattr(model, "config", None)
        count = config.get_text_config(decoder=True).num_hidden_layers if config is not None else 0
        return cls([StageLayer() for _ in range(count)])

    @classmethod
    def following(cls, cache: StageCache, rows: torch.Tensor) -> StageCache:
        """The cache of the next forward: `cache`'s keys and values so far, for `rows` (an index into its rows)."""
        return cls([StageLayer(None if layer.keys is None else (layer.keys[rows], layer.values[rows]))
                    for layer in cache.layers])  # fmt: skip


def unshareable_reason(model: torch.nn.Module, gradient_checkpointing: bool) -> str | None:
    """Why `model` cannot run a shared prefix in training, or None: every layer must attend to all keys (a
    sliding window's cache keeps only the last ones), and a checkpointed layer must be allowed to keep its cache."""
    config = getattr(model, "config", None)
    if config is None:
        return "the model has no config (its layers cannot be counted)"
    decoder = config.get_text_config(decoder=True)
    sliding = [t for t in getattr(decoder, "layer_types", None) or [] if t != "full_attention"]
    if sliding:
        return f"the model has layers of type {sorted(set(sliding))}, and only full attention is supported"
    if gradient_checkpointing:
        layers = [m for m in model.modules() if isinstance(m, GradientCheckpointingLayer)]
        if not layers or not all(hasattr(m, "_can_checkpoint_with_cache") for m in layers):
            return "this transformers version drops a checkpointed layer's cache (it has no _can_checkpoint_with_cache)"
    return None


def keep_cache_when_checkpointed(model: torch.nn.Module) -> None:
    """Let `model`'s checkpointed layers keep the cache they are given: a `StageCache` replays exactly."""
    for module in model.modules():
        if isinstance(module, GradientCheckpointingLayer):
            module._can_checkpoint_with_cache = True


def cache_argument(model: torch.nn.Module) -> str:
    """`cache` (transformers ≥ 5.2x, where `past_key_values` is deprecated) or `past_key_values` (before)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # a peft model's own forward
    return _cache_argument_of(type(base))


@functools.cache
def _cache_argument_of(model_class: type) -> str:
    # once per class: the hf server asks at every decode step
    return "cache" if "cache" in inspect.signature(model_class.forward).parameters else "past_key_values"
