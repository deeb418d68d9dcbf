"""Failover in real training: two real `hf` replicas, one killed (SIGKILL) while it generates. The batch completes
with every trajectory valid (its turns regenerated from the same prefix on the live replica), the weight push
routes around the dead replica, and once it is restarted it is brought to the current policy version before it
takes traffic again."""

from __future__ import annotations

import asyncio
import concurrent.futures
import gzip
import json
import time

import httpx
import pytest

from agentrl.cli import main
from agentrl.loops.drift import check_drift
from agentrl.rollout import LLMClient, SamplingParams
from agentrl.rollout.handles import HFServer
from agentrl.rollout.servers.hf.launch import launch_hf_server
from agentrl.trainer.sync import WeightSync
from agentrl.types import Trajectory

pytestmark = pytest.mark.integration

STEPS = 2


def running(url: str) -> int:
    try:
        return int(httpx.get(f"{url}/health", timeout=2).json()["running"])
    except httpx.HTTPError:
        return 0


def two_replicas(model_path: str):
    """Two `hf` servers, started side by side (each start is mostly one process's imports: ~10 s saved)."""
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        starts = [pool.submit(launch_hf_server, model_path, max_model_len=1024) for _ in range(2)]
    started = [f.result() for f in starts if f.exception() is None]
    if len(started) < 2:
        for handle in started:
            handle.stop()
        raise next(f.exception() for f in starts if f.exception() is not None)
    return started


def kill_once_busy(victim, timeout: float = 300.0) -> int:
    """SIGKILL the victim as soon as it has requests in flight; returns how many it had."""
    deadline = time.monotonic() + timeout
    while (busy := running(victim.url)) == 0:
        if time.monotonic() > deadline:
            return 0
        time.sleep(0.05)
    victim.process.kill()
    victim.process.wait()
    return busy


def test_a_replica_killed_mid_rollout_loses_no_trajectory(default_model_path, default_tokenizer, tmp_path):
    survivor, victim = two_replicas(default_model_path)
    killed = concurrent.futures.ThreadPoolExecutor(1).submit(kill_once_busy, victim)
    try:
        code = main(
            [
                "train",
                "recipe=quickstart",
                f"rollout.urls=[{survivor.url},{victim.url}]",
                "data.batch_size=2",
                "rollout.n=4",
                "rollout.max_tokens=48",
                "data.eval_files=[]",
                f"trainer.steps={STEPS}",
                f"output_dir={tmp_path}",
            ]
        )
        assert killed.result(timeout=300) > 0  # it died with requests in flight
        assert code == 0  # and the pushes after it routed around it
        metrics = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
        print("rollout/server_retries per step:", [m["rollout/server_retries"] for m in metrics])
        assert metrics[0]["rollout/server_retries"] >= 1  # the killed replica's requests were sent again
        assert metrics[-1]["rollout/live_replicas"] == 1.0
        trajectories = []
        for step in range(1, STEPS + 1):
            with gzip.open(tmp_path / "trajectories" / f"step_{step:04d}.jsonl.gz", "rt") as f:
                trajectories += [Trajectory.from_json(line) for line in f]
        assert len(trajectories) == 8 * STEPS
        assert not [t for t in trajectories if t.failed or t.error]
        # the tokens are the conversation's: sampled text may tokenize differently from how the tokenizer would
        # encode it (benign, "tokenization"), but no turn's tokens differ from its messages
        assert all(check_drift(default_tokenizer, t).kind != "template" for t in trajectories)
    finally:
        survivor.stop()
        victim.stop()


async def test_a_restarted_replica_is_brought_to_the_current_version_before_it_takes_traffic(
    default_model_path, default_tokenizer
):
    from safetensors.torch import load_file

    survivor, victim = two_replicas(default_model_path)
    servers = [HFServer(s.url, model_path=default_model_path) for s in (survivor, victim)]
    state = load_file(f"{default_model_path}/model.safetensors")
    state["model.norm.weight"] *= 1.5  # version 1: weights whose logprobs differ
    greedy = SamplingParams(max_tokens=16, temperature=0.0)
    prompt = default_tokenizer("The capital of France is").input_ids
    restarted = None
    try:
        async with LLMClient([s.url for s in servers], health_interval=0.2) as llm:
            sync = WeightSync(servers, router=llm.router)
            base = await llm.generate(prompt, greedy)
            victim.process.kill()
            victim.process.wait()
            await asyncio.gather(*(llm.generate(prompt, greedy) for _ in range(4)))  # finds it dead
            assert llm.router.dead == [servers[1].url]
            await asyncio.to_thread(sync.push, state, 1)  # routed around the dead replica
            restarted = await asyncio.to_thread(launch_hf_server, default_model_path, victim.port, max_model_len=1024)
            deadline = time.monotonic() + 60
            while llm.router.dead:
                assert time.monotonic() < deadline, "the restarted replica was never taken back"
                await asyncio.sleep(0.1)
            assert servers[1].served_version() == 1  # caught up before it was taken back
            assert llm.router.failover_metrics()["rollout/replica_restarts"] == 1.0
            outs = [await llm.generate(prompt, greedy, session_id=f"s{i}") for i in range(6)]
            assert {o.replica for o in outs} == {s.url for s in servers}
            # both replicas serve the same weights, and they are version 1's (the logprobs show the change)
            assert len({tuple(o.token_ids) for o in outs}) == 1
            assert max(abs(a - b) for o in outs for a, b in zip(o.logprobs, outs[0].logprobs, strict=True)) < 1e-4
            assert max(abs(a - b) for a, b in zip(outs[0].logprobs, base.logprobs, strict=False)) > 1e-2
            sync.close()
    finally:
        for server in (survivor, victim, restarted):
            if server is not None:
                server.stop()
