"""Weights as safetensors, with one rule for tied weights: a tensor that shares storage with an earlier name (a
tied output head, `lm_head.weight` sharing the input embeddings) is left out when written, as `save_pretrained`
does; loaders re-tie it. A reader that needs an alias written (vLLM reloads its head only from `lm_head.weight`)
names it in `keep`, and gets it as a copy."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import torch


def tied_aliases(tensors: torch.nn.Module | Mapping[str, torch.Tensor]) -> dict[str, str]:
    """{alias: original} for the names whose tensor is an earlier name's: a model's (its state dict with the
    parameters themselves, so sharded ones too) or a state dict's (the same storage and shape)."""
    state = tensors.state_dict(keep_vars=True) if isinstance(tensors, torch.nn.Module) else tensors
    seen: dict[object, str] = {}
    aliases: dict[str, str] = {}
    for name, tensor in state.items():
        key = _storage_key(tensor)
        if key in seen:
            aliases[name] = seen[key]
        else:
            seen[key] = name
    return aliases


def unique_tensors(state: Mapping[str, torch.Tensor], keep: Iterable[str] = ()) -> dict[str, torch.Tensor]:
    """The state's tensors on CPU, contiguous, each storage once (tied aliases left out, except those in `keep`,
    which are copied)."""
    aliases, kept = tied_aliases(state), set(keep)
    out: dict[str, torch.Tensor] = {}
    for name, value in state.items():
        if name in aliases and name not in kept:
            continue
        tensor = value.detach().contiguous().cpu()
        out[name] = tensor.clone() if name in aliases else tensor
    return out


def save_state_dict(
    state: Mapping[str, torch.Tensor],
    path: Path,
    keep: Iterable[str] = (),
    metadata: dict[str, str] | None = None,
) -> Path:
    """Write `state` as one safetensors file at `path` (the one rule for tied weights above), with `metadata`."""
    from safetensors.torch import save_file

    save_file(unique_tensors(state, keep), str(path), metadata=metadata)
    return path


def state_dict_bytes(state: Mapping[str, torch.Tensor], metadata: dict[str, str] | None = None) -> bytes:
    """Safetensors bytes of `state` (the one rule for tied weights above), with `metadata`."""
    from safetensors.torch import save

    return save(unique_tensors(state), metadata=metadata)


def _storage_key(tensor: torch.Tensor) -> object:
    if isinstance(tensor, torch.nn.Parameter):
        return id(tensor)  # a model's own parameter (a sharded one has no single storage to compare)
    return (tensor.data_ptr(), tuple(tensor.shape))
