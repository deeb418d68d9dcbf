"""Failover with two real `hf` replicas: one killed, the weight push routes around it, and once it is restarted it
is brought to the current policy version before it takes traffic again. (A replica killed while it generates in a
real training run, with rollout workers, every trajectory completing valid and exact, is
test_exact_training_real.py's two-replica run.)"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time

import httpx
import pytest

from agentrl.rollout import LLMClient, SamplingParams
from agentrl.rollout.handles import HFServer
from agentrl.rollout.servers.hf.launch import launch_hf_server
from agentrl.trainer.sync import WeightSync

pytestmark = pytest.mark.integration


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
