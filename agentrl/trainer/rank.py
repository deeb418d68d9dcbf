"""RankTrainer: everything one trainer rank holds (policy engine, LoRA, reference), built from the run config.

The local backend runs one in the driver process; the Ray backend runs one per actor, after the actor has
joined the torch.distributed group.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from agentrl.config.schema import AgentRLConfig
from agentrl.trainer.checkpoint import load_engine, save_engine
from agentrl.trainer.choices import choice_token_ids
from agentrl.trainer.engine import PolicyEngine, engine_config
from agentrl.trainer.lora import adapter_state, apply_lora, lora_scaling, merge_lora
from agentrl.trainer.reference import ReferencePolicy
from agentrl.trainer.sft import sft_step
from agentrl.trainer.step import policy_step
from agentrl.types import Trajectory


def uses_reference(cfg: AgentRLConfig) -> bool:
    """Whether the run keeps a reference policy (`trainer.use_reference`, or a KL penalty)."""
    return cfg.trainer.use_reference or cfg.trainer.kl_coef > 0


def default_device() -> torch.device:
    """The GPU this process sees (Ray sets CUDA_VISIBLE_DEVICES per actor), else the CPU."""
    return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")


def entropy_choice_ids(cfg: AgentRLConfig, model_path: str) -> list[int] | None:
    """The first tokens of `trainer.entropy_choices` in the policy's tokenizer (None when none are listed)."""
    if not cfg.trainer.entropy_choices:
        return None
    from agentrl.models import load_tokenizer

    return choice_token_ids(load_tokenizer(model_path), cfg.trainer.entropy_choices)


class RankTrainer:
    """One rank's policy: trains on rows `rank::world` of each step's trajectories.

    Args:
        cfg: the run configuration (`trainer.*` is read).
        model_path: folder of the initial policy (also the reference policy: pass the original model when
            resuming, then `load` the checkpoint).
        pad_token_id: padding token of the batches.
        rank, world: this rank and the number of ranks.
        mesh: the 1-D device mesh of the ranks (None for one rank).
    """

    def __init__(
        self,
        cfg: AgentRLConfig,
        model_path: str,
        pad_token_id: int,
        rank: int = 0,
        world: int = 1,
        mesh: Any = None,
    ):
        from agentrl.models import load_model

        self.cfg = cfg
        self.pad_token_id = pad_token_id
        self.rank, self.world = rank, world
        t = cfg.trainer
        with torch.random.fork_rng(devices=[]):  # the same LoRA init on every rank; the caller's RNG untouched
            torch.manual_seed(cfg.seed)
            model = load_model(model_path, device=str(default_device()))
            self.reference: ReferencePolicy | None = None
            if uses_reference(cfg) and not t.lora_rank:
                self.reference = ReferencePolicy.frozen_copy(model, mesh)
            if t.lora_rank:
                model = apply_lora(model, t.lora_rank, t.lora_alpha, t.lora_target_modules)
                self.reference = ReferencePolicy.adapters_off() if uses_reference(cfg) else None
        self.engine = PolicyEngine(model, engine_config(t), mesh)
        self.entropy_choice_ids = entropy_choice_ids(cfg, model_path)

    def step(self, trajectories: list[Trajectory]) -> dict[str, float]:
        """Advantages, loss and one optimizer step (collective); the global train/* metrics. With
        `trainer.objective=sft`, `trajectories` are demonstrations and the step is supervised (`sft_step`)."""
        shard = (self.rank, self.world)
        if self.cfg.trainer.objective == "sft":
            return sft_step(self.engine, self.cfg.trainer, trajectories, self.pad_token_id, shard=shard)
        return policy_step(
            self.engine,
            self.cfg.trainer,
            trajectories,
            self.pad_token_id,
            shard=shard,
            reference=self.reference,
            entropy_choice_ids=self.entropy_choice_ids,
        )

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Full weights on CPU with the base model's key names, LoRA merged; or the LoRA adapter alone when the
        servers hold it as one (`rollout.lora_adapter`) (collective; empty off rank 0)."""
        state = self.engine.full_state_dict()
        if self.cfg.trainer.lora_rank and state:
            if self.cfg.rollout.lora_adapter:
                return adapter_state(state)
            return merge_lora(state, lora_scaling(self.engine.model))
        return state

    def save(self, folder: Path) -> None:
        """Checkpoint model, optimizer, scheduler, step and this rank's RNG (collective)."""
        save_engine(self.engine, Path(folder), self.rank)

    def load(self, folder: Path) -> None:
        """Restore a checkpoint written by `save` (collective)."""
        load_engine(self.engine, Path(folder), self.rank)

    def gradients(self) -> dict[str, torch.Tensor]:
        """The last step's full gradients on CPU (collective; for tests and debugging)."""
        return self.engine.full_gradients()


__all__ = ["RankTrainer", "default_device", "uses_reference"]
