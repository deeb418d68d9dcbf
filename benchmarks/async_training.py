"""Training throughput of `sync`, `async` and `fully_async` on a task with a long-tailed tool, side by side.

Run from the repository root (the defaults: about 17 minutes on 2 cores with nothing beside; `--quick`: about 1):

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/async_training.py [--steps 8] [--seeds 5 6] [--median-s 1.5]

Each run (a mode and a seed) takes about a minute per 5 steps at `--median-s 1.5` (sync the longest, fully_async
the shortest): scale `--steps` and `--seeds` from that. The figures in `docs/concepts/trainer-modes.md` from before
2026-12-06 used 12 steps, 3 seeds and a 3 s tool (about 50 minutes).

What is measured
----------------
The real model, the real `hf` server and the real training loop, on the quickstart task (repeat a word) played
by `SlowToolLoop`: the model answers, then a "tool" runs whose latency is a seeded lognormal (median
`--median-s`, log-sd 0.5) times 10 for 5 % of the calls, the same for a given (prompt, sample) in every mode, as
a sandboxed tool or a test run would be. Each mode trains `--steps` steps of `data.batch_size` x `rollout.n`
trajectories from the same data order and seeds:

* **sync**: roll out a batch, train, push;
* **async** (`max_staleness` 1): the next batch rolls out while this one trains;
* **fully_async** (`max_staleness` 2, `rollout.weight_update=resume`): rollout never stops; each step takes the
  next complete groups.

Each mode runs once per `--seeds` value (`rollout.seed`: the sampling differs, the data order does not), because
the held-out reward of one short run depends on its draws: a run can settle for a while on a partial-credit
answer ("A hammer is a tool." earns 0.3) that another run leaves within a few steps.

Figures: trained trajectories per minute of each mode (wall clock from the first rollout to the last push, mean
over the seeds), the held-out reward after the last step (mean, and the spread: max - min over the seeds), and
each async mode's throughput over sync's. The last line printed is one JSON object. Targets:
`fully_async_over_sync` >= 2, and `fully_async_held_out_gap` (sync's mean held-out reward minus fully_async's)
no larger than `sync_held_out_spread`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `agentrl` and `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agentrl.loops.base import AgentLoopBase

MEDIAN_S = 1.5
QUICK_STEPS = 2
QUICK_OVERRIDES = ["data.batch_size=1", "rollout.n=2", "data.num_eval_samples=2"]
"""`--quick`: a smoke that checks the benchmark runs and prints its JSON line, in about 2 minutes."""
OUTLIER_P, OUTLIER_FACTOR, SIGMA = 0.05, 10.0, 0.5


def tool_latency(task: str, sample_index: int, median_s: float) -> float:
    """The seeded latency of the tool call of one trajectory (the same in every mode)."""
    rng = random.Random(f"{task}/{sample_index}")
    latency = rng.lognormvariate(math.log(median_s), SIGMA)
    return latency * OUTLIER_FACTOR if rng.random() < OUTLIER_P else latency


class SlowToolLoop(AgentLoopBase):
    """One answer, then a tool call of long-tailed latency (its result is not shown to the model)."""

    median_s = MEDIAN_S

    async def run(self, sample: Any, ctx: Any) -> Any:
        ctx.start(sample.prompt)
        await ctx.generate()
        key = sample.id or str(sample.prompt)  # quickstart rows have no id: the prompt names the task
        await asyncio.sleep(tool_latency(key, ctx.trajectory.sample_index, self.median_s))
        ctx.finish()
        return ctx.trajectory


def run_mode(mode: str, steps: int, url: str, out: Path, seed: int = 5, quick: bool = False) -> dict[str, float]:
    """Train `steps` steps in `mode` against the server at `url`; trained trajectories per minute and the final
    held-out reward."""
    from agentrl.cli import main

    extra = {
        "sync": [],
        "async": ["trainer.mode=async", "trainer.max_staleness=1"],
        "fully_async": ["trainer.mode=fully_async", "trainer.max_staleness=2", "rollout.weight_update=resume"],
    }[mode]
    args = [
        "train",
        "recipe=quickstart",
        "agent.name=benchmarks.async_training:SlowToolLoop",
        f"rollout.urls=[{url}]",
        f"rollout.seed={seed}",
        f"trainer.steps={steps}",
        f"trainer.eval_every={steps}",
        f"output_dir={out}",
        *extra,
        *(QUICK_OVERRIDES if quick else []),
    ]
    if main(args) != 0:
        raise RuntimeError(f"the {mode} run failed")
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [m for m in metrics if "perf/wall_s" in m]
    trained = sum(m["rollout/trajectories"] for m in steps)
    wall = steps[-1]["perf/wall_s"]  # from the first rollout to the last push (the last evaluation comes after)
    held_out = [m["eval/reward_mean"] for m in metrics if "eval/reward_mean" in m][-1]
    return {"trajectories_per_min": 60 * trained / wall, "held_out_reward": held_out, "wall_s": wall}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--seeds", type=int, nargs="+", default=[5, 6])
    parser.add_argument("--median-s", type=float, default=MEDIAN_S)
    parser.add_argument("--quick", action="store_true", help=f"a smoke: {QUICK_STEPS} small steps, one seed")
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.seeds, args.median_s = QUICK_STEPS, args.seeds[:1], 0.2
    from benchmarks import async_training  # the module the training run imports the loop from (not __main__)

    async_training.SlowToolLoop.median_s = args.median_s

    from agentrl.models import resolve_model
    from benchmarks.servers import hf_server

    started = time.monotonic()
    result: dict[str, Any] = {"steps": args.steps, "seeds": args.seeds, "tool_median_s": args.median_s}
    with hf_server(resolve_model("default")) as server, tempfile.TemporaryDirectory() as tmp:
        for mode in ("sync", "async", "fully_async"):
            runs = []
            for seed in args.seeds:
                figures = run_mode(mode, args.steps, server.url, Path(tmp) / f"{mode}-{seed}", seed, args.quick)
                print(f"{mode} (rollout.seed={seed}): {figures}", flush=True)
                runs.append(figures)
            result.update(summarise(mode, runs))
    for mode in ("async", "fully_async"):
        result[f"{mode}_over_sync"] = round(
            result[f"{mode}_trajectories_per_min"] / result["sync_trajectories_per_min"], 2
        )
        result[f"{mode}_held_out_gap"] = round(result["sync_held_out_reward"] - result[f"{mode}_held_out_reward"], 3)
    result["benchmark_s"] = round(time.monotonic() - started)  # the whole run, server start and evaluations included
    print(json.dumps(result))
    return result


def summarise(mode: str, runs: list[dict[str, float]]) -> dict[str, Any]:
    """Mean throughput, and the held-out rewards' mean, spread (max - min) and values, of one mode's runs."""
    held_out = [run["held_out_reward"] for run in runs]
    return {
        f"{mode}_trajectories_per_min": round(sum(run["trajectories_per_min"] for run in runs) / len(runs), 2),
        f"{mode}_held_out_reward": round(sum(held_out) / len(held_out), 3),
        f"{mode}_held_out_spread": round(max(held_out) - min(held_out), 3),
        f"{mode}_held_out_rewards": [round(value, 3) for value in held_out],
    }


if __name__ == "__main__":
    main()
