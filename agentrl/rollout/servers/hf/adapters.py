"""LoRA adapters over the `hf` server's one base model (`policies.X.lora_of`): several policies for one model's memory.

An adapter is created by its first weight push (`POST /v1/weights` with `adapter`), which carries its LoRA tensors
under the base model's module names (`model.layers.0.self_attn.q_proj.lora_A.weight`, ...) and its `lora_alpha`;
the rank and the adapted modules are read from the tensors. Later pushes replace its weights in place; each adapter
has its own policy version. A request picks its adapter by its `model` field (as vLLM serves LoRA adapters), and one
batch mixes rows of the base model and of any adapters (peft's mixed-batch LoRA forward).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator, Mapping, Sequence

import torch
from peft import LoraConfig, inject_adapter_in_model
from peft.tuners.lora import LoraLayer

from agentrl.rollout.servers.hf.weights import WeightUpdateError

BASE = "__base__"
"""peft's name for rows that the base model serves alone."""

_PARTS = (".lora_A.weight", ".lora_B.weight")


class Adapters:
    """The LoRA adapters loaded into one live model, and the version each one serves. Not thread-safe: the engine
    thread loads them and runs the model."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model
        self.versions: dict[str, int] = {}
        self._rows: Sequence[str | None] | str | None = None
        """The adapters of the rows of the model call under way (see `rows`)."""
        self._hooked: set[int] = set()

    def __contains__(self, name: object) -> bool:
        return name in self.versions

    def load(self, name: str, state: Mapping[str, torch.Tensor], lora_alpha: float, version: int) -> None:
        """Create adapter `name` from `state` (its first push) or replace its weights; checked before anything
        changes, so a bad push leaves every adapter as it was."""
        pairs = adapter_pairs(state)
        rank = _rank(pairs)
        if name in self.versions:
            self._check_same_shape(name, pairs)
        else:
            self._check_modules(pairs)
            config = LoraConfig(
                r=rank, lora_alpha=lora_alpha, target_modules=sorted(pairs), lora_dropout=0.0, bias="none"
            )
            with warnings.catch_warnings():  # peft warns that a second adapter makes several: that is the point
                warnings.filterwarnings("ignore", message="Already found a `peft_config`")
                inject_adapter_in_model(config, self.model, adapter_name=name)
            self._hook_new_layers()
        modules = dict(self.model.named_modules())
        with torch.no_grad():
            for module_name, (a, b) in pairs.items():
                layer = modules[module_name]
                layer.lora_A[name].weight.copy_(a)
                layer.lora_B[name].weight.copy_(b)
                layer.scaling[name] = lora_alpha / rank
        self.versions[name] = version

    @contextlib.contextmanager
    def rows(self, names: Sequence[str | None] | str | None) -> Iterator[None]:
        """Model calls inside run each row through its adapter: `names` per row, or one name (None: the base
        model) for every row of any call. Outside, every row is the base model's."""
        self._rows = names
        try:
            yield
        finally:
            self._rows = None

    def _hook_new_layers(self) -> None:
        """One forward pre-hook per LoRA layer, for good (hooks added and removed on every decode step would cost
        a hot loop), handing it the rows' adapters (peft's `adapter_names`)."""
        for layer in self.model.modules():
            if isinstance(layer, LoraLayer) and id(layer) not in self._hooked:
                layer.register_forward_pre_hook(self._with_adapters, with_kwargs=True)
                self._hooked.add(id(layer))

    def _with_adapters(self, _module: torch.nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        names = self._rows
        if names is None or isinstance(names, str):
            rows = [names or BASE] * args[0].shape[0]
        else:
            rows = [name or BASE for name in names]
        return args, {**kwargs, "adapter_names": rows}

    def _check_modules(self, pairs: Mapping[str, tuple[torch.Tensor, torch.Tensor]]) -> None:
        modules = dict(self.model.named_modules())
        for module_name, (a, b) in pairs.items():
            layer = modules.get(module_name)
            base = getattr(layer, "base_layer", layer)
            if not isinstance(base, torch.nn.Linear):
                raise WeightUpdateError(f"adapter module {module_name} is not a linear layer of the served model")
            if a.shape[1] != base.in_features or b.shape[0] != base.out_features:
                raise WeightUpdateError(
                    f"adapter module {module_name}: lora_A {tuple(a.shape)} and lora_B {tuple(b.shape)} do not fit "
                    f"a linear layer of {base.in_features} -> {base.out_features}"
                )

    def _check_same_shape(self, name: str, pairs: Mapping[str, tuple[torch.Tensor, torch.Tensor]]) -> None:
        modules = dict(self.model.named_modules())
        loaded = {n for n, m in modules.items() if isinstance(m, LoraLayer) and name in m.lora_A}
        if set(pairs) != loaded:
            raise WeightUpdateError(
                f"adapter {name} adapts {len(loaded)} modules, the update {len(pairs)}; an adapter keeps its modules"
            )
        for module_name, (a, b) in pairs.items():
            layer = modules[module_name]
            want = (layer.lora_A[name].weight.shape, layer.lora_B[name].weight.shape)
            if (a.shape, b.shape) != want:
                raise WeightUpdateError(
                    f"adapter {name}, module {module_name}: got shapes {tuple(a.shape)}, {tuple(b.shape)}, serving "
                    f"{tuple(want[0])}, {tuple(want[1])}; an adapter keeps its rank"
                )


def adapter_pairs(state: Mapping[str, torch.Tensor]) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """`{module name: (lora_A, lora_B)}` of an adapter's state dict; refuses other keys and unpaired tensors."""
    pairs: dict[str, dict[str, torch.Tensor]] = {}
    for key, tensor in state.items():
        part = next((p for p in _PARTS if key.endswith(p)), None)
        if part is None:
            raise WeightUpdateError(f"adapter weights hold {key}; an adapter holds only <module>{_PARTS[0]}/B tensors")
        pairs.setdefault(key.removesuffix(part), {})[part] = tensor
    if not pairs:
        raise WeightUpdateError("adapter weights are empty")
    unpaired = sorted(name for name, parts in pairs.items() if len(parts) != 2)
    if unpaired:
        raise WeightUpdateError(f"adapter modules without both lora_A and lora_B: {', '.join(unpaired[:5])}")
    return {name: (parts[_PARTS[0]], parts[_PARTS[1]]) for name, parts in pairs.items()}


def _rank(pairs: Mapping[str, tuple[torch.Tensor, torch.Tensor]]) -> int:
    ranks = {a.shape[0] for a, _ in pairs.values()} | {b.shape[1] for _, b in pairs.values()}
    if len(ranks) != 1:
        raise WeightUpdateError(f"adapter modules have different ranks {sorted(ranks)}; one rank per adapter")
    return ranks.pop()


__all__ = ["BASE", "Adapters", "adapter_pairs"]
