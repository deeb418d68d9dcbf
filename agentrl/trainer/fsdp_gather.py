"""FSDP2 and a forward that runs a layer more than once (`trainer.share_prompt_prefix`): the backward then passes
each layer once per run, and a layer resharded after its first pass would find its weights freed for the next. So
such a micro-batch keeps its layers' gathered weights until its backward is done; the others reshard as usual."""

from __future__ import annotations

from typing import Any

import torch


def fsdp_modules(model: torch.nn.Module) -> list[Any]:
    """The FSDP2-sharded modules of `model` (none when it is not sharded)."""
    import torch.distributed as dist

    if not dist.is_initialized() or dist.get_world_size() == 1:
        return []
    from torch.distributed.fsdp import FSDPModule

    return [m for m in model.modules() if isinstance(m, FSDPModule)]


def keep_gathered_through_backward(model: torch.nn.Module) -> None:
    """The next backward leaves every layer's weights gathered (`release_gathered` frees them)."""
    for module in fsdp_modules(model):
        module.set_reshard_after_backward(False)


def release_gathered(model: torch.nn.Module) -> None:
    """Free the gathered weights (the next forward gathers the updated shards) and reshard after backward again."""
    for module in fsdp_modules(model):
        module.reshard()
        module.set_reshard_after_backward(True)
