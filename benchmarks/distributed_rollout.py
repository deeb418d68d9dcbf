"""Rollout over Ray workers vs in one process: the agent-loop simulation of `agent_loop_overhead.py` (long-tailed
tool latency, simulated continuous-batching server), at the same total concurrency.

Run from the repository root (a few minutes on 2 cores; `--quick` takes seconds):

    .venv/bin/python benchmarks/distributed_rollout.py [--trajectories 1024] [--workers 2 4] [--quick]

What is measured
----------------
* The simulated server (`loop_sim.SimulatedServer`, `capacity` slots) runs in a Ray actor of its own, and every
  mode reaches it through the same actor calls, as every mode would reach a real server over HTTP: the modes
  differ only in where the agent loops run.
* **in_process**: today's embedded default, the real `RolloutManager` / `ToolAgentLoop` / `ToolHooks` in this
  process with `max_concurrency = trajectories`.
* **workers=N**: the same loops in N real `RolloutWorker` Ray actors (their `session` runs the simulated loops in
  place of the run's servers and tools), fed by the real `DistributedRolloutManager` (one global queue,
  request-level), `trajectories / N` slots each.

Each mode's wall time; the overhead of each workers=N run over in_process (target at 1024 trajectories with 2
workers: <= 5 %); each worker's share of the trajectories. The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `agentrl` and `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.agent_loop_overhead import _check, _configs, _samples
from benchmarks.loop_sim import FULL, QUICK, Params, SimulatedServer, latency_table, make_work_tool

ROOT = str(Path(__file__).resolve().parent.parent)


def tokenizer() -> Any:
    from tests.unit.chatml import chatml_tokenizer

    return chatml_tokenizer()


class ServerActor:
    """The simulated server in its own actor (one event loop, like a server process)."""

    def __init__(self, params: Params, tasks: int) -> None:
        self.server = SimulatedServer(tokenizer(), params)
        self.server.prepare(tasks)

    def bind(self, session_id: str, task: int) -> None:
        self.server.bind(session_id, task)

    async def generate(self, prompt_ids: list[int], sampling: Any, session_id: str | None = None) -> Any:
        return await self.server.generate(prompt_ids, sampling, session_id)


class RemoteServer:
    """A `TokenGenerator` whose calls go to the server actor."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor

    async def generate(self, prompt_ids: list[int], sampling: Any, session_id: str | None = None) -> Any:
        return await self.actor.generate.remote(prompt_ids, sampling, session_id)


def simulated_manager(server: Any, params: Params, trajectories: int, concurrency: int) -> Any:
    """The real RolloutManager over the remote simulated server, with the `work` tool."""
    from agentrl.loops.manager import RolloutManager
    from agentrl.loops.tool_setup import ToolHooks

    tok = tokenizer()
    agent, rollout = _configs(params, trajectories)
    rollout = rollout.model_copy(update={"max_concurrency": concurrency})
    hooks = ToolHooks([make_work_tool(latency_table(params, trajectories))], agent, tok)
    remote = RemoteServer(server)

    async def setup(ctx: Any) -> None:
        await server.bind.remote(ctx.trajectory.id, int(ctx.sample.id or 0))
        hooks.setup(ctx)

    return RolloutManager(remote, tok, agent, rollout, setup_context=setup, teardown_context=hooks.teardown)


def simulated_session(server: Any, params: Params, trajectories: int, concurrency: int) -> Any:
    """What a real `RolloutWorker` runs its jobs with here: the simulated loops over the remote simulated server."""

    @contextlib.asynccontextmanager
    async def session(cfg: Any) -> AsyncIterator[Any]:
        yield simulated_manager(server, params, trajectories, concurrency)

    return session


async def in_process(params: Params, trajectories: int) -> tuple[float, Counter[str]]:
    import ray

    server = ray.remote(ServerActor).options(max_concurrency=100_000).remote(params, trajectories)
    manager = simulated_manager(server, params, trajectories, trajectories)
    await server.bind.remote("warm-up", 0)
    started = time.perf_counter()
    out = await manager.run(_samples(trajectories))
    wall = time.perf_counter() - started
    _check(params, out)
    ray.kill(server)
    return wall, Counter({"in_process": len(out)})


async def over_workers(params: Params, trajectories: int, workers: int) -> tuple[float, Counter[str]]:
    import ray

    from agentrl.config.schema import AgentRLConfig
    from agentrl.loops.distributed import DistributedRolloutManager, WorkerSlot
    from agentrl.loops.worker import RolloutWorker
    from agentrl.rollout.router import Router

    server = ray.remote(ServerActor).options(max_concurrency=100_000).remote(params, trajectories)
    per_worker = -(-trajectories // workers)
    remote = ray.remote(RolloutWorker).options(num_cpus=0, max_concurrency=per_worker + 2)
    session = simulated_session(server, params, trajectories, per_worker)
    slots = [WorkerSlot(f"w{i}", remote.remote(AgentRLConfig(), [], f"w{i}", session=session)) for i in range(workers)]
    await asyncio.gather(*(s.actor.start.remote() for s in slots))
    _, rollout = _configs(params, trajectories)
    manager = DistributedRolloutManager(slots, Router(), rollout, per_worker)
    started = time.perf_counter()
    out = await manager.run(_samples(trajectories))
    wall = time.perf_counter() - started
    _check(params, out)
    for slot in slots:
        ray.kill(slot.actor)
    ray.kill(server)
    return wall, Counter(t.metadata["worker"] for t in out)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trajectories", type=int, default=None)
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--quick", action="store_true", help="small and fast")
    args = parser.parse_args(argv)
    params = replace(QUICK if args.quick else FULL)
    trajectories = args.trajectories or (32 if args.quick else 1024)

    import ray

    os.environ["PYTHONPATH"] = ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    try:
        base, _ = asyncio.run(in_process(params, trajectories))
        print(f"in_process: {trajectories} trajectories in {base:.2f} s", flush=True)
        result: dict[str, Any] = {"trajectories": trajectories, "in_process_s": round(base, 3)}
        for n in args.workers:
            wall, shares = asyncio.run(over_workers(params, trajectories, n))
            share = {w: round(c / trajectories, 3) for w, c in sorted(shares.items())}
            print(f"workers={n}: {wall:.2f} s, overhead {wall / base - 1:+.2%}, shares {share}", flush=True)
            result[f"workers_{n}_s"] = round(wall, 3)
            result[f"workers_{n}_overhead"] = round(wall / base - 1, 4)
            result[f"workers_{n}_shares"] = share
    finally:
        ray.shutdown()
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
