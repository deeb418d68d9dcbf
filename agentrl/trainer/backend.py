"""TrainBackend: the one interface the training loop calls, for one rank in-process or N ranks as Ray actors.

    backend = make_backend(cfg, model_path, pad_token_id)
    metrics = backend.step(trajectories)      # advantages, loss, one optimizer step over all ranks
    sync.push(backend.state_dict())           # full weights on CPU, LoRA merged, base model key names
    backend.save(run_dir / "checkpoint")      # model, optimizer, scheduler, engine step, RNG of every rank
    backend.close()

`trainer.num_ranks == 1` gives a `LocalBackend` (no Ray); more gives a `RayBackend` (`agentrl.trainer.workers`).
To resume, build the backend from the *original* model path (it is also the reference policy), then `load`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

import torch

from agentrl.config.schema import AgentRLConfig
from agentrl.trainer.engine import PolicyEngine
from agentrl.trainer.rank import RankTrainer
from agentrl.types import Trajectory


@runtime_checkable
class TrainBackend(Protocol):
    """The policy trainer as the loop sees it, whatever the number of ranks."""

    def step(self, trajectories: list[Trajectory]) -> dict[str, float]:
        """Advantages, loss and one optimizer step over all ranks; global train/* metrics (train/loss, train/kl
        with a reference, train/rollout_logprob_abs_diff, train/grad_norm, ...)."""
        ...

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Full weights on CPU for weight sync: LoRA merged, keys as in the base model."""
        ...

    def save(self, folder: Path) -> None:
        """Checkpoint model, optimizer, scheduler, engine step and the torch RNG states of every rank."""
        ...

    def load(self, folder: Path) -> None:
        """Restore a checkpoint written by `save`; the next `step` is the one an uninterrupted run takes."""
        ...

    def close(self) -> None:
        """Release the ranks (Ray actors, process groups); the backend is unusable afterwards."""
        ...


class LocalBackend:
    """One rank in this process, no Ray and no process group."""

    def __init__(self, cfg: AgentRLConfig, model_path: str, pad_token_id: int):
        self.trainer = RankTrainer(cfg, model_path, pad_token_id)

    @property
    def engine(self) -> PolicyEngine:
        """This rank's engine (benchmarks and tests)."""
        return self.trainer.engine

    def step(self, trajectories: list[Trajectory]) -> dict[str, float]:
        return self.trainer.step(trajectories)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return self.trainer.state_dict()

    def save(self, folder: Path) -> None:
        self.trainer.save(Path(folder))

    def load(self, folder: Path) -> None:
        self.trainer.load(Path(folder))

    def gradients(self) -> dict[str, torch.Tensor]:
        """The last step's full gradients (tests and debugging)."""
        return self.trainer.gradients()

    def close(self) -> None:
        pass


def make_backend(cfg: AgentRLConfig, model_path: str, pad_token_id: int) -> TrainBackend:
    """The backend for `cfg.trainer.num_ranks`: in-process for 1, Ray actors (see `cfg.ray`) for more."""
    if cfg.trainer.num_ranks == 1:
        return LocalBackend(cfg, model_path, pad_token_id)
    from agentrl.trainer.workers import RayBackend

    return RayBackend(cfg, model_path, pad_token_id)


__all__ = ["LocalBackend", "TrainBackend", "make_backend"]
