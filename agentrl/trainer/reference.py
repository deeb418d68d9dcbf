"""The reference policy π_ref: the frozen initial policy that the KL penalty (and `train/kl`) measures against."""

from __future__ import annotations

import contextlib
import copy
from typing import Any

import torch

from agentrl.trainer.batch import PaddedBatch
from agentrl.trainer.engine import PolicyEngine, shard_model


class ReferencePolicy:
    """log π_ref of response tokens, computed with the engine's micro-batching and precision.

    Two forms: `frozen_copy` keeps a copy of the initial model with no gradients (sharded like the policy under
    FSDP); `adapters_off` reuses a LoRA policy with its adapters switched off, since its base weights never
    train and so *are* the initial policy (no second copy in memory).
    """

    def __init__(self, model: torch.nn.Module | None):
        self.model = model

    @classmethod
    def frozen_copy(cls, model: torch.nn.Module, mesh: Any = None) -> ReferencePolicy:
        """A frozen deep copy of `model` (call before the policy is trained or sharded)."""
        ref = copy.deepcopy(model).eval()
        ref.requires_grad_(False)
        if mesh is not None and mesh.size() > 1:
            shard_model(ref, mesh)
        return cls(ref)

    @classmethod
    def adapters_off(cls) -> ReferencePolicy:
        """The engine's own LoRA model with its adapters disabled."""
        return cls(None)

    @torch.no_grad()
    def logprobs(self, engine: PolicyEngine, batch: PaddedBatch) -> torch.Tensor:
        """log π_ref of the response tokens of `batch`, [B, R] (0 on padding)."""
        if self.model is not None:
            return engine.logprobs(batch, model=self.model)
        with _adapters_disabled(engine.model):
            return engine.logprobs(batch)


@contextlib.contextmanager
def _adapters_disabled(model: torch.nn.Module):
    if not hasattr(model, "disable_adapter"):
        raise TypeError("ReferencePolicy.adapters_off needs a peft model (trainer.lora_rank > 0)")
    with model.disable_adapter():
        yield


__all__ = ["ReferencePolicy"]
