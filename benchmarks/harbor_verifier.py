"""What verifying a Harbor task with Harbor's own package costs over agentrl's own verifier (issue 77).

Needs the Docker engine, the bundled Harbor task images and Harbor's package (`scripts/setup.sh` makes
.venv-harbor/). Run from the repository root (about 30 s on 2 CPU cores):

    .venv/bin/python benchmarks/harbor_verifier.py [--rounds 10]

One container of the bundled `hello-file` task is verified `--rounds` times in each of three ways, the three
alternating within each round:

* `agentrl`: agentrl's own verifier (`data.harbor_reader=agentrl`): copy the tests in, run test.sh, read the
  reward file. The baseline.
* `harbor`: Harbor's public `Verifier.verify()` in the one long-lived process a run keeps
  (`agentrl.harbor.verify_client`), each of its commands and copies done on the container by agentrl.
* `harbor_process_each`: the same with a Harbor process started for each verification (and ended after it), the
  cost a design with one Python per verification pays (the bridge before issue 77 started one to parse the
  reward files).

Figures: median seconds per verification of each, and the overhead of each Harbor way over agentrl's (median
difference, seconds). The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentrl.config.schema import SandboxConfig
from agentrl.harbor import verify_client
from agentrl.harbor.container import open_task_container
from agentrl.harbor.limits import task_limits
from agentrl.harbor.package import harbor_python
from agentrl.harbor.task import load_task
from agentrl.harbor.verifier import run_verifier

TASK = Path(__file__).resolve().parents[1] / "recipes" / "harbor" / "tasks" / "hello-file"


async def timed(container, task) -> float:
    started = time.perf_counter()
    result = await run_verifier(container, task, 60)
    if result.rewards is None:
        raise SystemExit(f"the verification failed: {result.error}")
    return time.perf_counter() - started


async def measure(rounds: int) -> dict[str, list[float]]:
    sandbox = SandboxConfig(backend="docker")
    task = load_task(TASK, "harbor")
    ours = task.model_copy(update={"reader": "agentrl"})
    container = await open_task_container(task, task_limits(task, sandbox), sandbox, "bench-harbor-verifier")
    times: dict[str, list[float]] = {"agentrl": [], "harbor": [], "harbor_process_each": []}
    try:
        await timed(container, task)  # the long-lived process starts once per run: not a verification's cost
        for _ in range(rounds):
            times["agentrl"].append(await timed(container, ours))
            times["harbor"].append(await timed(container, task))
            verify_client.harbor_verifier().close()
            times["harbor_process_each"].append(await timed(container, task))
            verify_client.harbor_verifier().close()
            await timed(container, task)  # warm again for the next round's `harbor`
    finally:
        await container.close()
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="one round (a smoke)")
    args = parser.parse_args()
    if args.quick:
        args.rounds = 1
    if harbor_python() is None:
        print("Harbor's package is not installed (scripts/setup.sh makes .venv-harbor/)", file=sys.stderr)
        return 2
    times = asyncio.run(measure(args.rounds))
    median = {way: statistics.median(seconds) for way, seconds in times.items()}
    figures = {f"{way}_s": round(m, 4) for way, m in median.items()}
    for way in ("harbor", "harbor_process_each"):
        extra = [t - base for t, base in zip(times[way], times["agentrl"], strict=True)]
        figures[f"{way}_overhead_s"] = round(statistics.median(extra), 4)
    figures["rounds"] = args.rounds
    for way, m in median.items():
        print(f"{way:>20}: {m:.3f} s per verification")
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
