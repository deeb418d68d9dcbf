"""LoRA adapters (peft) on the policy, and merging them into full weights with the base model's key names.

Only the adapters train; the rollout servers (`hf`, vLLM) receive merged weights W + (α/r)·B·A under the
base model's names, so they load them like any full checkpoint; or, when several policies are adapters of one
base served once (`policies.X.lora_of`), the `hf` server receives the adapter alone (`adapter_state`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from agentrl.errors import UserError

ADAPTER = "default"
PEFT_PREFIX = "base_model.model."


def apply_lora(model: torch.nn.Module, rank: int, alpha: float, target_modules: Sequence[str]) -> torch.nn.Module:
    """Wrap `model` with LoRA adapters of rank `rank` on `target_modules` (['all-linear']: every linear layer
    but the output head); the base weights are frozen. Returns the peft model."""
    from peft import LoraConfig, get_peft_model

    targets: str | list[str] = "all-linear" if list(target_modules) == ["all-linear"] else list(target_modules)
    config = LoraConfig(r=rank, lora_alpha=alpha, target_modules=targets, lora_dropout=0.0, bias="none")
    try:
        return get_peft_model(model, config)
    except ValueError as error:  # peft: "Target modules {...} not found in the base model"
        raise UserError(f"trainer.lora_target_modules={list(target_modules)}: {error}") from None


def lora_scaling(model: torch.nn.Module) -> float:
    """α/r of a peft model's adapter (α/√r with rsLoRA)."""
    config = model.peft_config[ADAPTER]
    if config.rank_pattern or config.alpha_pattern:
        raise UserError("per-module LoRA ranks or alphas are not supported by merge_lora")
    return config.lora_alpha / (config.r**0.5 if config.use_rslora else config.r)


def merge_lora(state: Mapping[str, torch.Tensor], scaling: float) -> dict[str, torch.Tensor]:
    """Full weights from a peft state dict: W + scaling·B·A for each adapted layer, keys as in the base model.

    `base_model.model.x.q_proj.base_layer.weight` becomes `x.q_proj.weight`; adapter tensors are dropped.
    """
    out: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        if ".lora_" in key:
            if not key.rsplit(".lora_", 1)[1].startswith(("A.", "B.")):
                raise UserError(f"cannot merge LoRA tensor {key}: only linear-layer adapters are supported")
            continue
        name = key.removeprefix(PEFT_PREFIX).replace(".base_layer.", ".")
        out[name] = value
        if key.endswith(".base_layer.weight"):
            layer = key.removesuffix(".base_layer.weight")
            a, b = state[f"{layer}.lora_A.{ADAPTER}.weight"], state[f"{layer}.lora_B.{ADAPTER}.weight"]
            delta = (b.to(torch.float32) @ a.to(torch.float32)) * scaling
            out[name] = (value.to(torch.float32) + delta).to(value.dtype)
    return out


def adapter_state(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The adapter alone from a peft state dict, under the base model's module names, as the `hf` server loads a
    LoRA adapter (`policies.X.lora_of`): `base_model.model.x.q_proj.lora_A.default.weight` becomes
    `x.q_proj.lora_A.weight`; base weights are dropped."""
    out: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        if ".lora_" not in key:
            continue
        part = next((p for p in ("lora_A", "lora_B") if key.endswith(f".{p}.{ADAPTER}.weight")), None)
        if part is None:
            raise UserError(f"cannot serve LoRA tensor {key} as an adapter: only linear-layer adapters are supported")
        out[key.removeprefix(PEFT_PREFIX).removesuffix(f".{part}.{ADAPTER}.weight") + f".{part}.weight"] = value
    return out


__all__ = ["adapter_state", "apply_lora", "lora_scaling", "merge_lora"]
