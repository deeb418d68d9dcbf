"""Loading a new state dict into a live model in place, by parameter name.

Every parameter and persistent buffer of the model must be present with its exact shape (strict), except tied
aliases such as `lm_head.weight` when the input embeddings are tied: those may be omitted. Validation happens
before anything is copied, so a bad update leaves the model untouched. Names are the base model's even when LoRA
adapters are loaded (`agentrl.rollout.servers.hf.adapters`): a full update replaces the base under them.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from pathlib import Path

import torch
from safetensors.torch import load as load_bytes
from safetensors.torch import load_file

from agentrl.weight_delta import (
    WEIGHTS_ID_KEY,
    DeltaError,
    WeightDelta,
    decode_delta,
    is_delta,
    safetensors_metadata,
)
from agentrl.weights_io import tied_aliases

StateDict = Mapping[str, torch.Tensor]
Weights = StateDict | WeightDelta
"""What a weight update carries: a full state dict or a delta."""


class WeightUpdateError(ValueError):
    """A state dict that does not fit the model (missing/unexpected names, wrong shapes, unreadable file)."""


def read_state_dict(path: str | None = None, data: bytes | None = None) -> dict[str, torch.Tensor] | WeightDelta:
    """Read a safetensors state dict, or a delta (`agentrl.weight_delta`), from a file path or from raw bytes
    (exactly one of them)."""
    try:
        if path is not None:
            with open(path, "rb") as file:
                delta = is_delta(file.read(4))
            return decode_delta(Path(path).read_bytes()) if delta else load_file(path)
        if data is not None:
            return decode_delta(data) if is_delta(data) else load_bytes(data)
    except DeltaError as exc:
        raise WeightUpdateError(str(exc)) from exc
    except Exception as exc:  # safetensors raises its own SafetensorError besides OSError
        raise WeightUpdateError(f"cannot read safetensors weights: {exc}") from exc
    raise WeightUpdateError("weight update needs a safetensors `path` or a raw safetensors body")


def payload_weights_id(path: str | None = None, data: bytes | None = None) -> str | None:
    """The id a full push's file names its weights with (`agentrl.weight_delta.WEIGHTS_ID_KEY`), if any."""
    if data is None and path is not None:
        with open(path, "rb") as file:
            head = file.read(8)
            if len(head) < 8 or is_delta(head):
                return None
            data = head + file.read(struct.unpack("<Q", head)[0])
    if data is None or is_delta(data):
        return None
    try:
        return safetensors_metadata(data).get(WEIGHTS_ID_KEY)
    except (ValueError, struct.error):
        return None


def base_state(model: torch.nn.Module, keep_vars: bool = False) -> dict[str, torch.Tensor]:
    """The model's state dict under the base model's names: LoRA adapters left out, `q_proj.base_layer.weight`
    named `q_proj.weight`."""
    state = model.state_dict(keep_vars=keep_vars)
    return {k.replace(".base_layer.", "."): v for k, v in state.items() if ".lora_" not in k}


def validate_state_dict(model: torch.nn.Module, state: StateDict) -> None:
    """Raise `WeightUpdateError` unless `state` matches the model's names and shapes (tied aliases optional)."""
    target = base_state(model, keep_vars=True)
    aliases = tied_aliases(target)
    missing = sorted(n for n in target if n not in state and n not in aliases)
    unexpected = sorted(n for n in state if n not in target)
    wrong = sorted(
        f"{n}: got {tuple(t.shape)}, expected {tuple(target[n].shape)}"
        for n, t in state.items()
        if n in target and t.shape != target[n].shape
    )
    problems = [
        f"{label}: {', '.join(items[:5])}{' ...' if len(items) > 5 else ''}"
        for label, items in (("missing", missing), ("unexpected", unexpected), ("shape mismatch", wrong))
        if items
    ]
    if problems:
        raise WeightUpdateError("state dict does not match the model; " + "; ".join(problems))


@torch.no_grad()
def load_into(model: torch.nn.Module, state: StateDict) -> None:
    """Copy `state` into the model's tensors in place (dtype/device converted). Call `validate_state_dict` first."""
    target = base_state(model, keep_vars=True)
    aliases = tied_aliases(target)
    for name, tensor in state.items():
        if name in aliases and aliases[name] in state:
            continue  # tied: the original name carries the same storage
        target[name].copy_(tensor)
