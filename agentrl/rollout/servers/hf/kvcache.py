"""The running batch's state: one left-padded KV cache, its 2-D attention mask and per-row positions.

Rows are right-aligned: every row's newest token sits in the last column, padding sits on the left. Requests
join by `merge` (both sides left-padded to the longer length, stacked on the batch dim) and leave by `select`
(index_select on the batch dim); columns that became padding in every row are dropped from the left.

Each layer's keys/values live in a preallocated buffer with spare room at the end (`SlabLayer`), so a decode
step writes only the new token instead of re-concatenating the whole cache; the buffer grows by `reserve`
columns when full. Needs transformers >= 4.56 (the `Cache.layers` API).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

KV = list[tuple[torch.Tensor, torch.Tensor]]
DEFAULT_RESERVE = 64


class SlabLayer(DynamicLayer):
    """A cache layer whose `keys`/`values` are views [B, H, start:end, D] into preallocated buffers."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, length: int, reserve: int) -> None:
        super().__init__()
        self.reserve = reserve
        self._k, self._v = keys, values
        self._start, self._end = 0, length
        self.dtype, self.device = keys.dtype, keys.device
        self.is_initialized = True
        self._refresh()

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Write the new columns after the current ones (growing the buffer if needed); return the views."""
        q = key_states.shape[-2]
        if self._end + q > self._k.shape[-2]:
            self._grow(q)
        self._k[:, :, self._end : self._end + q] = key_states
        self._v[:, :, self._end : self._end + q] = value_states
        self._end += q
        return self._refresh()

    def _grow(self, q: int) -> None:
        length = self._end - self._start
        keys, values = self._refresh()
        self._k = stack_left_padded([keys], length, length + q + self.reserve)
        self._v = stack_left_padded([values], length, length + q + self.reserve)
        self._start, self._end = 0, length

    def _refresh(self) -> tuple[torch.Tensor, torch.Tensor]:
        keys = self._k[:, :, self._start : self._end]
        values = self._v[:, :, self._start : self._end]
        self.keys, self.values = keys, values
        return keys, values


def stack_left_padded(parts: Sequence[torch.Tensor], length: int, capacity: int) -> torch.Tensor:
    """Stack [b_i, H, L_i, D] tensors on the batch dim into a [sum b_i, H, capacity, D] buffer.

    Each part is right-aligned at column `length` (zeros on its left); columns past `length` are left unset.
    """
    first = parts[0]
    rows = sum(p.shape[0] for p in parts)
    buf = first.new_empty((rows, first.shape[1], capacity, first.shape[3]))
    row = 0
    for part in parts:
        n, pad = part.shape[0], length - part.shape[2]
        if pad:
            buf[row : row + n, :, :pad].zero_()
        buf[row : row + n, :, pad:length] = part
        row += n
    return buf


def get_kv(cache: Any) -> KV:
    """The (keys, values) tensors [B, H, L, D] of every layer of a transformers `DynamicCache`."""
    return [(layer.keys, layer.values) for layer in cache.layers]


def check_cache_supported(cache: Any) -> None:
    """Refuse models whose cache layers are not plain growing layers (sliding windows, linear attention, ...)."""
    for layer in cache.layers:
        if type(layer) not in (DynamicLayer, SlabLayer):
            raise NotImplementedError(
                f"the hf server supports full-attention models only; this model's cache has {type(layer).__name__}"
            )


class PaddedBatch:
    """KV cache (of `SlabLayer`s) + attention mask [B, L] + next position [B] of the running rows."""

    def __init__(self, kv_parts: Sequence[KV], masks: Sequence[torch.Tensor], positions: torch.Tensor) -> None:
        self.reserve = DEFAULT_RESERVE
        length = max(m.shape[1] for m in masks)
        self.mask = torch.cat([_pad_left(m, length) for m in masks])
        self.positions = positions
        self.cache = DynamicCache()
        self.cache.layers = [
            SlabLayer(
                stack_left_padded([kv[i][0] for kv in kv_parts], length, length + self.reserve),
                stack_left_padded([kv[i][1] for kv in kv_parts], length, length + self.reserve),
                length,
                self.reserve,
            )
            for i in range(len(kv_parts[0]))
        ]

    @property
    def size(self) -> int:
        return int(self.mask.shape[0])

    @property
    def length(self) -> int:
        return int(self.mask.shape[1])

    def decode_inputs(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Extend the mask by one column for the token about to be fed; return (mask, position_ids [B, 1])."""
        ones = torch.ones((self.size, 1), dtype=self.mask.dtype, device=self.mask.device)
        self.mask = torch.cat([self.mask, ones], dim=1)
        return self.mask, self.positions[:, None]

    def advance(self) -> None:
        """Account for the token fed in the last decode step."""
        self.positions = self.positions + 1

    def merge(self, kv: KV, mask: torch.Tensor, positions: torch.Tensor) -> PaddedBatch:
        """A new batch: our rows, then the given (freshly prefilled) rows."""
        return PaddedBatch([get_kv(self.cache), kv], [self.mask, mask], torch.cat([self.positions, positions]))

    def select(self, rows: torch.Tensor) -> PaddedBatch:
        """A new batch with only `rows` (1-D index tensor), all-padding leading columns dropped."""
        mask = self.mask.index_select(0, rows)
        first = int(mask.any(dim=0).int().argmax())
        kv = [
            (k[:, :, first:].index_select(0, rows), v[:, :, first:].index_select(0, rows))
            for k, v in get_kv(self.cache)
        ]
        return PaddedBatch([kv], [mask[:, first:]], self.positions.index_select(0, rows))


def _pad_left(t: torch.Tensor, length: int) -> torch.Tensor:
    """Left-pad the last dim of a 2-D mask with zeros up to `length`."""
    return F.pad(t, (length - t.shape[-1], 0)) if t.shape[-1] < length else t
