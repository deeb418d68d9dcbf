"""`agentrl rollout`: run a recipe's agent loop over its data against real rollout servers and save the results.

Writes `<output_dir>/trajectories.jsonl` (one `Trajectory` per line, in completion order) and
`<output_dir>/summary.json`, and prints a short summary.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from pathlib import Path

from agentrl.config.run_dir import output_dir
from agentrl.config.schema import AgentRLConfig
from agentrl.errors import UserError
from agentrl.loops.hooks import prepare_run, run_samples
from agentrl.loops.session import rollout_session
from agentrl.rewards.policy_rewards import reward_pipeline
from agentrl.types import Sample, Trajectory


def rollout_samples(cfg: AgentRLConfig) -> list[Sample]:
    """The held-out samples of the run (files or env seeds), else its training samples."""
    samples = run_samples(cfg, "eval")
    if samples:
        return samples
    if not cfg.data.train_files and not cfg.env.enabled:
        raise UserError(
            "no data to roll out: set data.eval_files or data.train_files (JSONL or Parquet), or an environment "
            "(env.id=FrozenLake-v1)"
        )
    return run_samples(cfg, "train")


def run_rollout(cfg: AgentRLConfig) -> Path:
    """Roll out every held-out (else training) sample `rollout.n` times; returns the run directory."""
    return asyncio.run(_rollout(cfg))


async def _rollout(cfg: AgentRLConfig) -> Path:
    from agentrl.loops.policy_clients import serve_policies
    from agentrl.models import load_tokenizer, resolve_model

    samples = rollout_samples(cfg)
    prepare_run(cfg, samples)
    out = output_dir(cfg, "rollout")
    model_path = resolve_model(cfg.model)
    tokenizer = load_tokenizer(model_path)
    rewards = reward_pipeline(cfg)
    trajectories: list[Trajectory] = []
    started = time.perf_counter()
    async with (
        serve_policies(cfg) as (llm, _),
        rollout_session(cfg, llm, tokenizer, show_progress=True, run_id=out.name) as manager,
    ):
        with (out / "trajectories.jsonl").open("w") as f:
            async for traj in manager.stream(samples):
                await rewards.ascore(traj, samples[traj.metadata["sample_position"]])
                f.write(traj.to_json() + "\n")
                trajectories.append(traj)
    summary = summarize(trajectories, time.perf_counter() - started)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary))
    print(f"trajectories written to {out / 'trajectories.jsonl'}")
    return out


def summarize(trajectories: list[Trajectory], wall_s: float) -> dict[str, object]:
    """Counts, mean reward, stop reasons and throughput of a rollout."""
    n = len(trajectories) or 1
    return {
        "trajectories": len(trajectories),
        "mean_reward": sum(t.reward or 0.0 for t in trajectories) / n,
        "stop_reasons": dict(Counter(str(t.stop_reason) for t in trajectories)),
        "failed": sum(t.failed for t in trajectories),
        "mean_turns": sum(t.num_turns for t in trajectories) / n,
        "generated_tokens": sum(t.num_generated_tokens_in_all_steps() for t in trajectories),
        "wall_s": round(wall_s, 2),
    }
