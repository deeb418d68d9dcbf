"""Docker sandbox latency: cold start, warm lease, exec overhead over a bare `docker exec`, and throughput.

Needs the Docker engine and the base image (`agentrl sandbox build`). Run from the repository root:

    .venv/bin/python benchmarks/sandbox.py            # about a minute on 2 CPU cores
    .venv/bin/python benchmarks/sandbox.py --quick    # fewer rounds

What it measures, in one run, with the same small container settings throughout:

* `cold_start_s`: `DockerSandbox.create` + the first `exec("true")` (volume, container, start, first exec);
  median of a few rounds.
* `warm_exec_ms`: a `SandboxPool` lease of a warm container (the pool's health check included) + one
  `exec("true")`; median over rounds, each waiting until the pool has re-warmed its replacement.
* `exec_over_bare`: median latency of `await sandbox.exec(CMD)` (the call the tools make: thread hop, timeout
  wrapper with process-group kill, watchdog, output caps, exit code) over the median latency of a bare
  docker-SDK `container.exec_run(["bash", "-c", CMD])` on the *same* container; the two alternate within each
  round (order swapped every round) so that drift of the machine hits both alike. Target <= 2.0.
* `execs_per_s_c8`: completed `exec("true")` calls per second with 8 concurrent trajectories, each on its own
  leased sandbox; the table also shows the same load through 8 threads calling a bare `exec_run`.

Every container is labelled with this run's id and removed at the end (also on errors and Ctrl-C); the script
checks that none is left. The last line printed is the JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentrl.config.schema import SandboxConfig
from agentrl.sandbox.docker import LABEL, DockerSandbox, docker_client, remove_all
from agentrl.sandbox.images import BASE_IMAGE
from agentrl.sandbox.pool import SandboxPool

SMALL = {"memory": "256m", "cpus": 1.0, "pids_limit": 64, "workdir_size": "64m"}
CMD = "echo hello"
CONCURRENCY = 8


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:8.1f} ms"


async def cold_start(client: Any, image: str, run_id: str, rounds: int) -> list[float]:
    """Seconds of create + first exec, per round (the container is removed after each, untimed)."""
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        sandbox = await DockerSandbox.create(image, client=client, run_id=run_id, **SMALL)
        try:
            result = await sandbox.exec("true")
            times.append(time.perf_counter() - start)
            assert result.ok, result
        finally:
            await sandbox.close()
    return times


async def warm_lease(client: Any, image: str, run_id: str, rounds: int) -> list[float]:
    """Seconds of lease (from a warm pool) + one exec, per round."""
    config = SandboxConfig(backend="docker", image=image, pool_size=1, max_containers=2, **SMALL)
    times = []
    async with SandboxPool(config, run_id=run_id, client=client) as pool:
        for i in range(rounds):
            while pool.stats()["warm"] < 1:  # the replacement of the last lease is still starting
                await asyncio.sleep(0.05)
            start = time.perf_counter()
            async with pool.lease(f"bench-{i}") as sandbox:
                result = await sandbox.exec("true")
                times.append(time.perf_counter() - start)
                assert result.ok, result
    return times


async def exec_vs_bare(client: Any, image: str, run_id: str, rounds: int) -> tuple[list[float], list[float]]:
    """Per-round seconds of `sandbox.exec(CMD)` and of a bare `exec_run` of the same command, same container."""
    sandbox = await DockerSandbox.create(image, client=client, run_id=run_id, **SMALL)
    try:
        container = client.containers.get(sandbox.id)

        async def ours() -> float:
            start = time.perf_counter()
            result = await sandbox.exec(CMD)
            elapsed = time.perf_counter() - start
            assert result.ok and result.stdout == "hello\n", result
            return elapsed

        def bare() -> float:
            start = time.perf_counter()
            code, output = container.exec_run(["bash", "-c", CMD], demux=True)
            elapsed = time.perf_counter() - start
            assert code == 0 and output[0] == b"hello\n", (code, output)
            return elapsed

        for _ in range(3):  # warm up both paths (connections, threads, page cache)
            await ours()
            bare()
        t_ours, t_bare = [], []
        for i in range(rounds):
            if i % 2:
                t_bare.append(bare())
                t_ours.append(await ours())
            else:
                t_ours.append(await ours())
                t_bare.append(bare())
        return t_ours, t_bare
    finally:
        await sandbox.close()


async def throughput(client: Any, image: str, run_id: str, duration_s: float) -> tuple[float, float]:
    """Execs per second at concurrency 8: through our sandboxes (one per trajectory), then bare `exec_run`."""
    config = SandboxConfig(backend="docker", image=image, pool_size=0, max_containers=CONCURRENCY, **SMALL)
    async with SandboxPool(config, run_id=run_id, client=client) as pool:
        phase = asyncio.Barrier(CONCURRENCY + 1)  # all leased and warmed up; then: all loops stopped
        stop, release = asyncio.Event(), asyncio.Event()
        counts = [0] * CONCURRENCY
        ids: list[str] = []

        async def trajectory(i: int) -> None:
            async with pool.lease(f"c8-{i}") as sandbox:
                ids.append(sandbox.id)
                await sandbox.exec("true")
                await phase.wait()
                while not stop.is_set():
                    result = await sandbox.exec("true")
                    assert result.ok, result
                    counts[i] += 1
                await phase.wait()
                await release.wait()  # keep the lease until the bare run on the same containers is done

        tasks = [asyncio.create_task(trajectory(i)) for i in range(CONCURRENCY)]
        try:
            async with asyncio.timeout(120):
                await phase.wait()
                start = time.perf_counter()
                await asyncio.sleep(duration_s)
                stop.set()
                await phase.wait()
                ours_rate = sum(counts) / (time.perf_counter() - start)

            containers = [client.containers.get(cid) for cid in ids]
            bare_counts = [0] * CONCURRENCY
            bare_stop = threading.Event()

            def bare_worker(i: int) -> None:
                while not bare_stop.is_set():
                    code, _ = containers[i].exec_run(["bash", "-c", "true"])
                    assert code == 0
                    bare_counts[i] += 1

            threads = [threading.Thread(target=bare_worker, args=(i,)) for i in range(CONCURRENCY)]
            start = time.perf_counter()
            for t in threads:
                t.start()
            await asyncio.sleep(duration_s)
            bare_stop.set()
            await asyncio.to_thread(lambda: [t.join() for t in threads])
            bare_rate = sum(bare_counts) / (time.perf_counter() - start)
        finally:
            release.set()
            stop.set()
            await asyncio.gather(*tasks, return_exceptions=True)
    return ours_rate, bare_rate


async def run(args: argparse.Namespace) -> dict[str, Any]:
    client = docker_client()
    client.images.get(args.image)  # fails early, with the engine's message, when the image is missing
    run_id = f"bench-{uuid.uuid4().hex[:8]}"
    quick = args.quick
    try:
        cold = await cold_start(client, args.image, run_id, 2 if quick else 3)
        print(f"cold create + first exec  median {statistics.median(cold):6.2f} s   ({len(cold)} rounds)")
        warm = await warm_lease(client, args.image, run_id, 3 if quick else 8)
        print(f"warm lease + exec         median {_ms(statistics.median(warm))}   ({len(warm)} rounds)")
        t_ours, t_bare = await exec_vs_bare(client, args.image, run_id, 10 if quick else 40)
        m_ours, m_bare = statistics.median(t_ours), statistics.median(t_bare)
        print(f"exec {CMD!r:14}       ours  {_ms(m_ours)}   bare exec_run {_ms(m_bare)}   ({len(t_ours)} rounds)")
        ours_rate, bare_rate = await throughput(client, args.image, run_id, 2.0 if quick else 5.0)
        label = f"concurrency {CONCURRENCY}"
        print(f"{label:26}ours  {ours_rate:6.1f} execs/s   bare exec_run {bare_rate:6.1f} execs/s")
    finally:
        remove_all(client, run_id)
    left = client.containers.list(all=True, filters={"label": [LABEL, f"agentrl.run={run_id}"]})
    assert not left, f"containers left behind: {[c.name for c in left]}"
    result = {
        "cold_start_s": round(statistics.median(cold), 3),
        "warm_exec_ms": round(statistics.median(warm) * 1e3, 1),
        "exec_over_bare": round(m_ours / m_bare, 3),
        "execs_per_s_c8": round(ours_rate, 1),
    }
    print(f"sandbox exec is {result['exec_over_bare']:.2f}x a bare docker exec (target <= 2.0)")
    return result


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run every measurement, print the table, end with the JSON line; returns the JSON object."""
    parser = argparse.ArgumentParser(description="Docker sandbox latency and throughput.")
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--image", default=BASE_IMAGE, help=f"sandbox image (default {BASE_IMAGE})")
    result = asyncio.run(run(parser.parse_args(argv)))
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
