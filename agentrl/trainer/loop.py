"""The synchronous (on-policy) training loop: rollout → reward → advantages → policy step → weight sync.

`agentrl train recipe=...` runs `train(cfg)`. The run directory gets `metrics.jsonl` (one line per step) and
`trajectories/step_XXXX.jsonl.gz`.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import random
import time
from pathlib import Path
from typing import Any

import torch

from agentrl.config.schema import AgentRLConfig
from agentrl.data import run_samples
from agentrl.errors import AgentRLError
from agentrl.loops.session import rollout_session
from agentrl.rewards.pipeline import RewardPipeline
from agentrl.trainer.batch import collate
from agentrl.trainer.engine import EngineConfig, PolicyEngine
from agentrl.trainer.step import policy_step
from agentrl.trainer.sync import WeightSync
from agentrl.types import Trajectory


def train(cfg: AgentRLConfig) -> Path:
    """Train the policy of `cfg` for `trainer.steps` steps; returns the run directory."""
    if cfg.trainer.mode != "sync":
        raise AgentRLError("trainer.mode=async is not available yet; use trainer.mode=sync")
    if cfg.trainer.num_ranks != 1:
        raise AgentRLError("trainer.num_ranks > 1 (FSDP over Ray) is not available yet; use trainer.num_ranks=1")
    return asyncio.run(Trainer(cfg).run())


class Trainer:
    """Owns the engine, the rollout servers' client and the run directory for one training run."""

    def __init__(self, cfg: AgentRLConfig):
        from agentrl.runner import output_dir

        self.cfg = cfg
        self.out = output_dir(cfg, "train")
        self.train_samples = run_samples(cfg, "train")
        self.eval_samples = run_samples(cfg, "eval")
        self.rewards = RewardPipeline(cfg.reward)
        self.rng = random.Random(cfg.seed)
        torch.manual_seed(cfg.seed)

    async def run(self) -> Path:
        from agentrl.models import load_model, load_tokenizer, resolve_model
        from agentrl.rollout.client import LLMClient
        from agentrl.rollout.serve import rollout_servers

        model_path = resolve_model(self.cfg.model)
        self.tokenizer = load_tokenizer(model_path)
        self.engine = PolicyEngine(load_model(model_path), _engine_config(self.cfg))
        async with (
            rollout_servers(self.cfg, model_path) as urls,
            LLMClient(urls, timeout=self.cfg.rollout.request_timeout_s) as llm,
            rollout_session(self.cfg, llm, self.tokenizer, run_id=self.out.name) as manager,
        ):
            self.sync = WeightSync(list(urls), router=llm.router)
            self.manager = manager
            await self._evaluate(0)
            for step in range(1, self.cfg.trainer.steps + 1):
                await self._step(step)
                if self.cfg.trainer.eval_every and step % self.cfg.trainer.eval_every == 0:
                    await self._evaluate(step)
        print(f"run directory: {self.out}")
        return self.out

    async def _step(self, step: int) -> None:
        started = time.perf_counter()
        samples = self.rng.sample(self.train_samples, min(self.cfg.data.batch_size, len(self.train_samples)))
        trajectories = await self.manager.run(samples)
        await self.rewards.ascore_batch(trajectories, [samples[t.metadata["sample_position"]] for t in trajectories])
        rollout_s = time.perf_counter() - started
        trainable = [t for t in trajectories if t.num_generated_tokens > 0]
        metrics = policy_step(self.engine, self.cfg.trainer, trainable, self.tokenizer.pad_token_id or 0)
        train_s = time.perf_counter() - started - rollout_s
        metrics["perf/weight_sync_s"] = self.sync.push(self.engine.full_state_dict())
        metrics.update(_rollout_metrics(trajectories))
        metrics.update({"step": step, "perf/rollout_s": rollout_s, "perf/train_s": train_s})
        self._log(metrics)
        self._save_trajectories(step, trajectories)

    async def _evaluate(self, step: int) -> None:
        if not self.eval_samples:
            return
        greedy = self.cfg.rollout.model_copy(update={"temperature": 0.0, "n": 1})
        manager = self.manager.with_rollout(greedy)
        trajectories = await manager.run(self.eval_samples)
        positions = [t.metadata["sample_position"] for t in trajectories]
        await self.rewards.ascore_batch(trajectories, [self.eval_samples[p] for p in positions])
        rewards = [t.reward or 0.0 for t in trajectories]
        self._log({"step": step, "eval/reward_mean": sum(rewards) / max(len(rewards), 1)})

    def _log(self, metrics: dict[str, Any]) -> None:
        with (self.out / "metrics.jsonl").open("a") as f:
            f.write(json.dumps(metrics) + "\n")
        shown = {k: float(f"{v:.4g}") if isinstance(v, float) else v for k, v in metrics.items()}
        print(json.dumps(shown), flush=True)

    def _save_trajectories(self, step: int, trajectories: list[Trajectory]) -> None:
        folder = self.out / "trajectories"
        folder.mkdir(exist_ok=True)
        with gzip.open(folder / f"step_{step:04d}.jsonl.gz", "wt") as f:
            for traj in trajectories:
                f.write(traj.to_json() + "\n")


def _engine_config(cfg: AgentRLConfig) -> EngineConfig:
    t = cfg.trainer
    return EngineConfig(
        lr=t.lr,
        warmup_steps=t.warmup_steps,
        total_steps=t.steps,
        grad_clip=t.grad_clip,
        micro_batch_tokens=t.micro_batch_tokens,
    )


def _rollout_metrics(trajectories: list[Trajectory]) -> dict[str, float]:
    n = max(len(trajectories), 1)
    return {
        "rollout/reward_mean": sum(t.reward or 0.0 for t in trajectories) / n,
        "rollout/response_tokens_mean": sum(t.num_generated_tokens for t in trajectories) / n,
        "rollout/turns_mean": sum(t.num_turns for t in trajectories) / n,
        "rollout/errors": float(sum(t.error is not None for t in trajectories)),
    }


__all__ = ["Trainer", "collate", "train"]
