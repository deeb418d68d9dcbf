"""Agent-loop orchestration overhead: request-level async vs a batch-synchronous baseline, on a simulated server.

Pure CPU simulation: no model, no Docker, no network. Run from the repository root:

    .venv/bin/python benchmarks/agent_loop_overhead.py            # full run (< 2 minutes)
    .venv/bin/python benchmarks/agent_loop_overhead.py --quick    # seconds, for the unit test

The model
---------
* **Server** (`SimulatedServer`; it, the parameters and the reference schedules live in `loop_sim.py`):
  `capacity` decode slots with continuous batching. Every slot emits one token
  per `per_token_s` whatever the number of busy slots, so a request producing `n` tokens occupies one slot for
  `service = prefill_s + n * per_token_s`. Requests beyond `capacity` wait, first come first served. The slot
  schedule is kept as arithmetic on the wall clock (a heap of the times at which each slot frees up): a request
  arriving at `a` starts at `max(a, earliest free slot)` and ends `service` later, and the caller sleeps until
  then. The server is thus as exact as a separate process would be: a busy event loop delays the *client*
  (which is the orchestration overhead we measure), never the server's own throughput.
* **Script**: every trajectory makes `turns` assistant turns of exactly `tokens_per_turn` generated tokens
  (EOS included); every turn but the last is a hermes tool call
  `<tool_call>{"name": "work", "arguments": {"task": i, "turn": k}}</tool_call>`, the last one a final answer.
* **Tool** `work`: sleeps a long-tailed latency, lognormal around `tool_median_s` (log-sd `tool_sigma`),
  times `outlier_factor` for a fraction `outlier_p` of calls. The latency is a pure, seeded function of
  `(task, turn)`, so both modes see exactly the same latencies.

The modes
---------
* **async** (request-level async, the design of agentrl): the real `RolloutManager` with
  `max_concurrency = trajectories`, the real `ToolAgentLoop` and `ToolHooks` (per-trajectory `ToolSet`, hermes
  parser, exact token bookkeeping through the chat template) over the simulated server. Each trajectory sends
  its next request as soon as its tool returns.
* **sync** (the batch-synchronous baseline, the pre-server-mode design): all trajectories advance turn by turn
  together: generate for the whole batch (through the same server, so the phase lasts until the slowest
  request ends), then run every tool call and wait for the slowest, then the next turn. It is implemented here,
  lean (no trajectory bookkeeping), so any orchestration cost only flatters the baseline.

The figures
-----------
* `async_over_sync` = wall(sync) / wall(async) at `--sync-trajectories` (256) concurrent trajectories.
* `overhead_vs_ideal` = wall(async) / ideal - 1 at `--trajectories` (1024) concurrent trajectories. The
  **ideal** is the analytic server-bound lower bound `max(total work / capacity, longest critical path)`:
  total work is `trajectories * turns * service` (slot-seconds, so `/ capacity` is the time the server needs
  at full occupancy) and a trajectory's critical path is `turns * service` plus its own tool latencies. No
  schedule, with any orchestrator, can finish before either, so the figure charges the orchestrator with
  everything between it and the server's raw throughput: loop CPU (chat template, tokenizer, tool set),
  event-loop delays, task start-up, and the FIFO tail at the end of the run.
* Diagnostics in the table and as extra JSON keys: a zero-cost **replay** (`replay_makespan`, an exact
  discrete-event simulation of the same FIFO server and tool latencies in which every request arrives the
  instant its trajectory's tool returns) isolates the orchestrator's own cost (`overhead_vs_replay`, which can
  be slightly negative: FIFO is not optimal and the real arrival order differs a little) from the inherent
  scheduling tail (`replay_over_ideal`); the `cpu` column is the benchmark process's CPU over wall time and
  `ms/turn` its CPU per assistant turn.

Why these parameters
--------------------
* 8 turns (7 tool calls): the batch-synchronous design pays the slowest of the batch's tool calls at every
  turn (with 2% of 10x outliers, a 256-call turn almost always waits for one), the async design pays each
  trajectory's own sum once. With 4 turns that gain is capped near 2x by the critical path; with 8 the
  zero-cost replays give 3.2x at seed 0 (from 2.65x to 3.18x over seeds 0-5).
* 32 slots of 128 ms (96 tokens at 1.25 ms plus 8 ms prefill): 250 requests/s at full capacity. The loops
  cost about 1.2 ms of CPU per turn here, so the orchestrator uses under a third of one core; at 1024
  trajectories total work / capacity (33 s) is about 4x the longest critical path, i.e. the run is server-bound
  (the replay is within 2% of work / capacity). A much faster simulated server would measure how many turns
  per second one Python process can drive (about 800 on one core of this machine), not the design.

The last line printed is one JSON object:
`{"async_over_sync": ..., "overhead_vs_ideal": ..., "concurrent_trajectories": 1024, ...}`.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `agentrl` and `tests.unit.chatml` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agentrl.config import AgentConfig, RolloutConfig
from agentrl.loops.context import AgentContext
from agentrl.loops.manager import RolloutManager
from agentrl.loops.tool_setup import ToolHooks
from agentrl.rollout.protocol import SamplingParams
from agentrl.tools import get_parser
from agentrl.types import Message, Sample, StopReason, Trajectory
from benchmarks.loop_sim import (
    FULL,
    QUICK,
    Params,
    SimulatedServer,
    ideal_bounds,
    latency_table,
    make_work_tool,
    replay_makespan,
    sync_replay_makespan,
)

# ------------------------------------------------------------------------------------------------------- modes


def _samples(trajectories: int) -> list[Sample]:
    return [Sample(id=str(i), prompt=[Message(role="user", content=f"Run task {i}.")]) for i in range(trajectories)]


def _configs(params: Params, trajectories: int) -> tuple[AgentConfig, RolloutConfig]:
    budget = 16 * params.turns * params.tokens_per_turn + 4096
    agent = AgentConfig(name="tool_agent", max_turns=params.turns, max_total_tokens=budget)
    rollout = RolloutConfig(n=1, max_concurrency=trajectories, max_tokens=params.tokens_per_turn, max_model_len=budget)
    return agent, rollout


def _check(params: Params, trajectories: list[Trajectory]) -> None:
    for traj in trajectories:
        calls = traj.metrics.get("tool/calls", 0)
        if traj.stop_reason is not StopReason.DONE or traj.num_turns != params.turns or calls != params.turns - 1:
            raise RuntimeError(
                f"trajectory {traj.metadata.get('sample_id')} went off script: stop_reason={traj.stop_reason}, "
                f"turns={traj.num_turns}, tool calls={calls}, error={traj.error}"
            )


@dataclass
class Run:
    """Wall-clock and CPU seconds of one timed run."""

    wall_s: float
    cpu_s: float
    peak_in_flight: int = 0


async def run_async(params: Params, trajectories: int, tokenizer: Any) -> Run:
    """`trajectories` trajectories through the real RolloutManager / ToolAgentLoop / ToolHooks."""
    latencies = latency_table(params, trajectories)
    server = SimulatedServer(tokenizer, params)
    server.prepare(trajectories)
    agent, rollout = _configs(params, trajectories)
    hooks = ToolHooks([make_work_tool(latencies)], agent, tokenizer)

    def setup(ctx: AgentContext) -> None:
        server.bind(ctx.trajectory.id, int(ctx.sample.id or 0))
        hooks.setup(ctx)

    manager = RolloutManager(server, tokenizer, agent, rollout, setup_context=setup, teardown_context=hooks.teardown)
    samples = _samples(trajectories)
    cpu, started = time.process_time(), time.perf_counter()
    out = await manager.run(samples)
    run = Run(time.perf_counter() - started, time.process_time() - cpu, server.max_in_flight())
    _check(params, out)
    return run


async def run_sync(params: Params, trajectories: int, tokenizer: Any) -> Run:
    """The batch-synchronous baseline: every turn, generate for the whole batch, then run all its tools."""
    latencies = latency_table(params, trajectories)
    server = SimulatedServer(tokenizer, params)
    server.prepare(trajectories)
    work = make_work_tool(latencies)
    parser = get_parser("hermes")
    sampling = SamplingParams(max_tokens=params.tokens_per_turn)
    sessions = [f"sync-{i}" for i in range(trajectories)]
    for task, session in enumerate(sessions):
        server.bind(session, task)
    tokens: list[list[int]] = [tokenizer.encode(f"Run task {i}.") for i in range(trajectories)]
    cpu, started = time.process_time(), time.perf_counter()
    for turn in range(params.turns):
        outs = await asyncio.gather(*(server.generate(tokens[i], sampling, s) for i, s in enumerate(sessions)))
        for i, out in enumerate(outs):
            tokens[i].extend(out.token_ids)
        if turn == params.turns - 1:
            break
        calls = [parser.parse(tokenizer.decode(out.token_ids, skip_special_tokens=True)).calls for out in outs]
        results = await asyncio.gather(*(work.fn(**c[0].arguments) for c in calls))
        if len(results) != trajectories:
            raise RuntimeError("the baseline lost tool calls")
    return Run(time.perf_counter() - started, time.process_time() - cpu, server.max_in_flight())


# -------------------------------------------------------------------------------------------------------- main


@dataclass
class Row:
    """One line of the results table."""

    mode: str
    trajectories: int
    run: Run
    reference_s: float
    reference: str
    turns: int

    def render(self) -> str:
        cpu_ms = 1e3 * self.run.cpu_s / (self.trajectories * self.turns)
        return (
            f"{self.mode:<6} {self.trajectories:>6} {self.run.wall_s:>8.2f} {self.reference_s:>8.2f} "
            f"{self.run.wall_s / self.reference_s:>8.3f} {self.run.cpu_s / self.run.wall_s:>6.0%} {cpu_ms:>8.2f}  "
            f"{self.reference}"
        )


HEADER = f"{'mode':<6} {'trajs':>6} {'wall s':>8} {'ref s':>8} {'wall/ref':>8} {'cpu':>6} {'ms/turn':>8}  reference"


def _timed(coro: Any) -> Run:
    gc.collect()
    run = asyncio.run(coro)
    if not isinstance(run, Run):
        raise TypeError(f"expected a Run, got {type(run).__name__}")
    return run


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run both modes, print the table, end with the JSON line; returns the JSON object."""
    parser = argparse.ArgumentParser(description="Agent-loop orchestration overhead on a simulated server.")
    parser.add_argument("--quick", action="store_true", help="small and fast (for the unit test)")
    parser.add_argument("--sync-trajectories", type=int, default=None, help="trajectories of async_over_sync")
    parser.add_argument("--trajectories", type=int, default=None, help="trajectories of overhead_vs_ideal")
    parser.add_argument("--seed", type=int, default=0, help="seed of the tool latencies")
    args = parser.parse_args(argv)
    params = replace(QUICK if args.quick else FULL, seed=args.seed)
    n_sync = args.sync_trajectories or (32 if args.quick else 256)
    n_big = args.trajectories or (32 if args.quick else 1024)

    from tests.unit.chatml import chatml_tokenizer

    tokenizer = chatml_tokenizer()
    rate = params.capacity / params.service_s
    print(f"parameters: {json.dumps(asdict(params))}")
    print(f"server: {params.service_s * 1e3:.0f} ms per request, {rate:.0f} requests/s at full capacity")

    lat_sync, lat_big = latency_table(params, n_sync), latency_table(params, n_big)
    sync = _timed(run_sync(params, n_sync, tokenizer))
    async_small = _timed(run_async(params, n_sync, tokenizer))
    async_big = _timed(run_async(params, n_big, tokenizer))
    replay = replay_makespan(params, lat_big)
    work, critical = ideal_bounds(params, lat_big)
    ideal = max(work, critical)

    k = params.turns
    rows = [
        Row("sync", n_sync, sync, sync_replay_makespan(params, lat_sync), "zero-cost batch-synchronous replay", k),
        Row("async", n_sync, async_small, replay_makespan(params, lat_sync), "zero-cost async replay", k),
        Row("async", n_big, async_big, replay, "zero-cost async replay", k),
        Row("async", n_big, async_big, ideal, f"ideal: max(work/capacity, critical path {critical:.2f} s)", k),
    ]
    print(HEADER)
    for row in rows:
        print(row.render())
    peak = max(r.peak_in_flight for r in (sync, async_small, async_big))
    print(f"server: at most {peak} of {params.capacity} slots decoding at once")
    result = {
        "async_over_sync": round(sync.wall_s / async_small.wall_s, 3),
        "overhead_vs_ideal": round(async_big.wall_s / ideal - 1, 4),
        "concurrent_trajectories": n_big,
        "async_over_sync_at": n_sync,
        "overhead_vs_replay": round(async_big.wall_s / replay - 1, 4),
        "replay_over_ideal": round(replay / ideal, 4),
    }
    print(
        f"request-level async is {result['async_over_sync']:.2f}x faster than batch-synchronous at {n_sync} "
        f"trajectories (target >= 2.5); orchestration overhead at {n_big}: {result['overhead_vs_ideal']:+.2%} "
        "over the ideal (target <= 5%)"
    )
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
