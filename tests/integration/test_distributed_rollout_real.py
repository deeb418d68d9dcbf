"""Rollout workers as Ray actors on a local Ray, against the real model on the shared `hf` server: the same seeded
rollout gives the same tokens with 0 and 2 workers, and a worker killed mid-batch (`ray.kill`) loses no
trajectory and duplicates none."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from agentrl.config.loader import load_config
from agentrl.loops.drift import check_drift
from agentrl.loops.session import rollout_session
from agentrl.rollout import LLMClient
from agentrl.types import Sample

pytestmark = pytest.mark.integration


def config(workers: int, *more: str):
    overrides = [
        "recipe=quickstart",
        f"rollout.workers={workers}",
        "rollout.num_cpus_per_worker=0.5",
        "rollout.n=2",
        "rollout.max_tokens=24",
        "rollout.seed=3",
        *more,
    ]
    return load_config(overrides=overrides)


def samples(count: int) -> list[Sample]:
    words = ["apple", "river", "stone", "cloud", "ember", "maple", "otter", "prism"]
    return [
        Sample(id=f"s{i}", prompt=[{"role": "user", "content": f"Repeat the word {words[i % 8]} once."}])
        for i in range(count)
    ]


async def roll(cfg, url, tokenizer, batch):
    async with LLMClient([url]) as llm, rollout_session(cfg, llm, tokenizer) as manager:
        return await manager.run(batch), manager


async def test_the_same_seeded_rollout_gives_the_same_tokens_with_and_without_workers(
    local_ray, hf_server_url, default_tokenizer
):
    batch = samples(4)
    local, _ = await roll(config(0), hf_server_url, default_tokenizer, batch)
    spread, _ = await roll(config(2), hf_server_url, default_tokenizer, batch)
    assert [t.token_ids for t in spread] == [t.token_ids for t in local]
    assert {t.metadata["worker"] for t in spread} == {"w0", "w1"}  # both workers ran trajectories
    assert "worker" not in local[0].metadata


async def test_tree_rollouts_spread_over_two_workers(local_ray, hf_server_url, default_tokenizer):
    """Each job is a whole tree, forked on the worker that plays it; the driver gets every leaf back."""
    overrides = ["rollout.tree.branch_turns=[1]", "rollout.tree.width=2", "env.max_steps=3", "agent.max_turns=3",
                 "env.kwargs.bump_ends_episode=false"]  # fmt: skip
    cfg = load_config(overrides=["recipe=gym", "rollout.workers=2", "rollout.num_cpus_per_worker=0.5",
                                 "rollout.n=2", "rollout.seed=3", *overrides])  # fmt: skip
    batch = [Sample(id=f"s{i}", prompt=[], extra_info={"seed": i}) for i in range(2)]
    leaves, _ = await roll(cfg, hf_server_url, default_tokenizer, batch)
    trees = Counter(t.metadata["tree"]["id"] for t in leaves)
    assert len(trees) == 2 * 2 and all(1 <= n <= 2 for n in trees.values())  # an episode may end before turn 1
    assert sum(trees.values()) > len(trees)  # at least one tree forked
    assert {t.metadata["worker"] for t in leaves} <= {"w0", "w1"} and not [t for t in leaves if t.failed]
    for tree in trees:  # a tree's leaves all come from the worker that forked it
        assert len({t.metadata["worker"] for t in leaves if t.metadata["tree"]["id"] == tree}) == 1


async def test_a_worker_killed_mid_batch_loses_and_duplicates_nothing(local_ray, hf_server_url, default_tokenizer):
    import ray

    cfg = config(2, "rollout.max_tokens=48", "rollout.worker_concurrency=4")
    batch = samples(8)
    async with LLMClient([hf_server_url]) as llm, rollout_session(cfg, llm, default_tokenizer) as manager:
        stream = manager.stream(batch)
        out = [await anext(stream)]
        victim = manager.workers[1]
        ray.kill(victim.actor, no_restart=False)  # Ray restarts it (rollout.worker_max_restarts)
        out += [t async for t in stream]
        metrics = await manager.take_metrics(1.0)
        await asyncio.sleep(0)
    keys = Counter((t.metadata["sample_position"], t.sample_index) for t in out)
    assert keys == Counter((p, k) for p in range(8) for k in range(2))  # each exactly once
    assert not [t for t in out if t.failed]
    assert metrics["rollout/job_retries"] >= 1  # the killed worker's in-flight jobs ran again
    assert any(t.metadata["attempt"] == 1 for t in out)
    assert all(check_drift(default_tokenizer, t).kind != "template" for t in out)


def test_two_training_steps_of_the_gym_recipe_over_two_workers(local_ray, hf_server_url, tmp_path):
    import json

    from agentrl.cli import main

    args = [
        "train",
        "recipe=gym",
        f"rollout.urls=[{hf_server_url}]",
        "rollout.workers=2",
        "rollout.num_cpus_per_worker=0.5",
        "trainer.steps=2",
        "trainer.eval_every=2",
        "env.num_eval_seeds=4",
        "data.batch_size=2",
        f"output_dir={tmp_path}",
    ]
    assert main(args) == 0
    metrics = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    steps = [m for m in metrics if "rollout/trajectories" in m]
    assert [m["step"] for m in steps] == [1, 2]
    assert all(m["rollout/trajectories"] == 8.0 and m["rollout/live_workers"] == 2.0 for m in steps)
    assert all(m["perf/rollout_worker_busy/w0"] > 0 and m["perf/rollout_worker_busy/w1"] > 0 for m in steps)
    assert any("eval/success_rate" in m for m in metrics)  # the greedy held-out pass ran on the workers too
