"""Checkpoints of a policy engine, so that the next step after `load` is the step an uninterrupted run takes.

A checkpoint folder holds:
    policy/              model and optimizer state, torch.distributed.checkpoint (each rank writes its shards;
                         it loads into any number of ranks); frozen parameters (a LoRA base) are left out
    engine.pt            LR scheduler state and engine step (rank 0)
    rng_rank{r}.pt       torch RNG states (CPU and CUDA) of rank r
With several hosts the folder must be on a filesystem every rank can reach.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from agentrl.errors import UserError
from agentrl.trainer.engine import PolicyEngine

POLICY_DIR = "policy"
ENGINE_FILE = "engine.pt"


def save_engine(engine: PolicyEngine, folder: Path, rank: int = 0) -> None:
    """Write the engine's state to `folder` (collective under FSDP: every rank calls it)."""
    import torch.distributed.checkpoint as dcp

    folder.mkdir(parents=True, exist_ok=True)
    model_state, optim_state = _state(engine)
    with _single_process_quiet():
        dcp.save({"model": model_state, "optim": optim_state}, checkpoint_id=str(folder / POLICY_DIR), **_group(engine))
    if rank == 0:
        torch.save({"scheduler": engine.scheduler.state_dict(), "step": engine.step_count}, folder / ENGINE_FILE)
    torch.save(_rng_state(), _rng_file(folder, rank))


def load_engine(engine: PolicyEngine, folder: Path, rank: int = 0) -> None:
    """Restore what `save_engine` wrote (collective under FSDP).

    Raises:
        UserError: `folder` holds no engine checkpoint.
    """
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import set_state_dict

    if not (folder / POLICY_DIR).is_dir() or not (folder / ENGINE_FILE).is_file():
        raise UserError(
            f"{folder} is not a trainer checkpoint (it needs {POLICY_DIR}/ and {ENGINE_FILE}); "
            "pass a folder written by TrainBackend.save"
        )
    model_state, optim_state = _state(engine)
    state = {"model": model_state, "optim": optim_state}
    with _single_process_quiet():
        dcp.load(state, checkpoint_id=str(folder / POLICY_DIR), **_group(engine))
    set_state_dict(
        engine.model,
        engine.optimizer,
        model_state_dict=state["model"],
        optim_state_dict=state["optim"],
        options=_options(engine),
    )
    meta = torch.load(folder / ENGINE_FILE, weights_only=False)
    engine.scheduler.load_state_dict(meta["scheduler"])
    engine.step_count = int(meta["step"])
    rng = _rng_file(folder, rank)
    if rng.is_file():  # a checkpoint of fewer ranks has none for the extra ones: they keep their own
        _set_rng_state(torch.load(rng, weights_only=False))


def _state(engine: PolicyEngine) -> tuple[dict[str, Any], dict[str, Any]]:
    from torch.distributed.checkpoint.state_dict import get_state_dict

    return get_state_dict(engine.model, engine.optimizer, options=_options(engine))


def _group(engine: PolicyEngine) -> dict[str, Any]:
    """DCP's process arguments: the ranks' group under FSDP, else a plain single-process checkpoint."""
    if engine.world_size == 1:
        return {"no_dist": True}
    return {"process_group": engine.mesh.get_group()}


@contextlib.contextmanager
def _single_process_quiet() -> Iterator[None]:
    with warnings.catch_warnings():  # DCP warns on every single-process save/load, which is what we mean
        warnings.filterwarnings("ignore", message="torch.distributed is disabled", category=UserWarning)
        yield


def _options(engine: PolicyEngine) -> Any:
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    frozen = any(not p.requires_grad for p in engine.model.parameters())
    return StateDictOptions(ignore_frozen_params=True, strict=not frozen)


def _rng_file(folder: Path, rank: int) -> Path:
    return folder / f"rng_rank{rank}.pt"


def _rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["cpu"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


__all__ = ["load_engine", "save_engine"]
