"""Forking an episode's state versus starting fresh and replaying what led there (issue 45).

Needs the Docker engine (its SWE task image is built when missing). Run from the repository root:

    .venv/bin/python benchmarks/fork.py            # about a minute on 2 CPU cores
    .venv/bin/python benchmarks/fork.py --quick    # one round

* `swe_fork_over_replay`: a SWE task container after 5 tool calls an agent makes early (list the repository,
  grep a function, edit a file, import the package, `git diff`). Baseline: start a fresh container from the task's
  image (`open_task_sandbox`: container, repository copied and committed) and replay the 5 calls. Fork:
  `sandbox.fork(1)` of the container that made them. The figure is replay seconds over fork seconds (median over
  rounds, the two alternating within each round). Target >= 5. `swe_prepared_fork_over_replay`: the same with the
  fork's container started ahead (`prepare_forks`, as a tree rollout does while the turn before a fork is played;
  the benchmark lets the start finish, as a model's turn outlasts it), so the fork only copies the files.
* `gym_fork_over_replay`: a FrozenLake episode (`GymEpisode`, as the gym loop plays it) after 5 moves. Baseline:
  make the episode, reset it with the seed, replay the 5 replies; fork: `episode.fork(1)` (a copy that shares what
  the env never writes, `agentrl.envs.gym.read_only_parts`, and copies gym.make's wrappers and a toy-text env
  shallowly with their generator). Same ratio, median of 200 rounds (each takes milliseconds).

Every container carries this run's label and is removed at the end, also on errors and Ctrl-C. The last line
printed is the JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentrl.config.schema import EnvConfig
from agentrl.envs.gym import GymEpisode
from agentrl.sandbox.base import Sandbox
from agentrl.sandbox.docker import docker_client, remove_all
from agentrl.swe.repo import open_task_sandbox
from agentrl.swe.report import patch_files
from agentrl.swe.task import SWETask, load_tasks

ROOT = Path(__file__).resolve().parents[1]
ACTIONS = [2, 2, 1, 1, 1]  # FrozenLake 4x4: right, right, down, down, down (no hole on the way)


def agent_calls(task: SWETask) -> list[str]:
    """Five calls an agent makes early in a SWE episode."""
    path = patch_files(task.patch)[0]
    module = path.removesuffix(".py").removesuffix("/__init__").replace("/", ".").removeprefix("src.")
    return [
        "ls -la",
        f"grep -n 'def ' {path} | head -20",
        f"sed -i '1i # looked here' {path}",
        f"python -c 'import {module}'",
        "git diff --stat",
    ]


async def run_calls(sandbox: Sandbox, calls: list[str]) -> None:
    for call in calls:
        await sandbox.exec(call, timeout=60)


async def swe_round(task: SWETask, run_id: str) -> tuple[float, float, float]:
    """(replay seconds, fork seconds, prepared fork seconds) of one round."""
    calls = agent_calls(task)
    parent, _ = await open_task_sandbox(task, run_id=run_id)
    opened: list[Sandbox] = [parent]
    try:
        await run_calls(parent, calls[:-1])
        await parent.prepare_forks(1)  # what a tree does before the turn that precedes a fork
        await run_calls(parent, calls[-1:])
        await asyncio.gather(*(asyncio.wrap_future(f) for f in parent._spares))  # a model's turn outlasts a start
        start = time.perf_counter()
        fresh, _ = await open_task_sandbox(task, run_id=run_id)
        opened.append(fresh)
        await run_calls(fresh, calls)
        replay = time.perf_counter() - start
        start = time.perf_counter()
        opened += await parent.fork(1)
        prepared = time.perf_counter() - start
        start = time.perf_counter()
        opened += await parent.fork(1)
        fork = time.perf_counter() - start
        same = [(await s.read_file(patch_files(task.patch)[0])) for s in opened]
        assert len(set(same)) == 1, "the forks and the replay must hold the parent's files"
        return replay, fork, prepared
    finally:
        await asyncio.gather(*(s.close() for s in opened))


def gym_round() -> tuple[float, float]:
    config = EnvConfig(id="FrozenLake-v1", kwargs={"is_slippery": False})
    parent = GymEpisode.from_config(config)
    parent.reset(seed=0)
    replies = [parent.adapter.action_text(action) for action in ACTIONS]
    for reply in replies:
        parent.act(reply)
    start = time.perf_counter()
    fresh = GymEpisode.from_config(config)
    fresh.reset(seed=0)
    for reply in replies:
        fresh.act(reply)
    replay = time.perf_counter() - start
    start = time.perf_counter()
    (child,) = parent.fork(1)
    fork = time.perf_counter() - start
    assert child.state_key == fresh.state_key == parent.state_key and child.steps == len(ACTIONS)
    for episode in (parent, fresh, child):
        episode.close()
    return replay, fork


def smallest_task() -> SWETask:
    """The bundled task with the fewest tests, its image built first when missing (as a run would)."""
    from agentrl.swe.prepare import prepare_task_images

    tasks = load_tasks(ROOT / "recipes/swe_agent/data/train.jsonl")
    task = min(tasks, key=lambda t: len(t.PASS_TO_PASS) + len(t.FAIL_TO_PASS))
    prepare_task_images([task.to_sample()])
    return task


def ratio(rounds: list[tuple[float, ...]], column: int = 1) -> tuple[float, float, float]:
    """Median replay seconds, median fork seconds (the `column`-th time of each round), and their ratio."""
    replay = statistics.median(r[0] for r in rounds)
    fork = statistics.median(r[column] for r in rounds)
    return replay, fork, replay / fork


async def main_async(rounds: int) -> dict[str, float]:
    run_id = f"bench-fork-{uuid.uuid4().hex[:8]}"
    task = smallest_task()
    try:
        swe = [await swe_round(task, run_id) for _ in range(rounds)]
    finally:
        remove_all(docker_client())
    gym_rounds = [gym_round() for _ in range(200)]
    swe_replay, swe_fork, swe_ratio = ratio(swe)
    _, swe_prepared, prepared_ratio = ratio(swe, column=2)
    gym_replay, gym_fork, gym_ratio = ratio(gym_rounds)
    print(f"SWE task {task.instance_id}, 5 calls: replay {swe_replay:.2f} s, fork {swe_fork:.2f} s -> {swe_ratio:.1f}x")
    print(f"  fork into containers prepared during the last turn: {swe_prepared:.3f} s -> {prepared_ratio:.1f}x")
    print(f"FrozenLake, 5 steps: replay {gym_replay * 1e3:.2f} ms, fork {gym_fork * 1e3:.2f} ms -> {gym_ratio:.1f}x")
    return {
        "swe_fork_over_replay": round(swe_ratio, 2),
        "swe_replay_s": round(swe_replay, 3),
        "swe_fork_s": round(swe_fork, 3),
        "swe_prepared_fork_over_replay": round(prepared_ratio, 2),
        "swe_prepared_fork_s": round(swe_prepared, 3),
        "gym_fork_over_replay": round(gym_ratio, 2),
        "rounds": rounds,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one round")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main_async(1 if args.quick else 5))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
