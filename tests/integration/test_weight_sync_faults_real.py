"""Faults in the middle of a weight push (and of generation), with real processes: a server paused (SIGSTOP),
killed (SIGKILL), or on
another "host" (a container) cut off from its network while it holds a push, and the object store losing the
weights. Each push returns within twice its deadline, the faulty replica routed around, and once it answers again
it is brought to the current version before it takes traffic (the router takes it back only after the catch-up),
holding the trainer's weights bit for bit; a killed replica restarted on its port gets a full push. (The
trainer killed mid-push and resumed: `test_weight_delta_real.py`.)

The `hf` servers hold each push for `HOLD_S` before applying it (`AGENTRL_FAULT_WEIGHTS_DELAY_S`): the window in
which a test strikes, seen in the server's `/health` (`weights_pending`).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time

import httpx
import pytest
import torch

from agentrl.rollout import LLMClient, SamplingParams
from agentrl.rollout.handles import HFServer
from agentrl.rollout.servers.hf.app import FAULT_WEIGHTS_DELAY_ENV
from agentrl.rollout.servers.hf.launch import launch_hf_server
from agentrl.sandbox.containers import owner_labels
from agentrl.trainer.sync import WeightSync
from agentrl.weight_delta import cast_state, weights_digest

pytestmark = pytest.mark.integration

HOLD_S = 2.0
DEADLINE_S = 10.0


def version_state(base: dict[str, torch.Tensor], version: int) -> dict[str, torch.Tensor]:
    """Weights of `version`: every element moved a little, as a training step moves them."""
    gen = torch.Generator().manual_seed(version)
    return {k: v + 1e-4 * torch.randn(v.shape, generator=gen) for k, v in base.items()}


def held_by(server: HFServer) -> str:
    return server.weights_digest()


async def wait_busy(url: str, what: str, timeout: float = 60.0) -> None:
    """Until the server's `/health` counts at least one of `what`: `weights_pending` (a weight update received,
    not yet applied) or `running` (requests generating)."""
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient() as http:
        while (await http.get(f"{url}/health", timeout=5)).json().get(what, 0) < 1:
            assert time.monotonic() < deadline, f"{url} never had {what}"
            await asyncio.sleep(0.02)


async def wait_taken_back(llm: LLMClient, timeout: float = 90.0) -> float:
    started = time.monotonic()
    while llm.router.dead:
        assert time.monotonic() - started < timeout, "the replica was never taken back"
        await asyncio.sleep(0.1)
    return time.monotonic() - started


def report(fault: str, detected_s: float, what: str) -> None:
    print(f"FAULT {fault}: detected in {detected_s:.1f} s (deadline {DEADLINE_S:.0f} s); {what}")


@pytest.fixture
def base_state(default_model_path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(f"{default_model_path}/model.safetensors")


async def test_a_server_paused_then_killed_mid_push_is_routed_around_and_caught_up(default_model_path, base_state):
    env = {FAULT_WEIGHTS_DELAY_ENV: str(HOLD_S)}
    steady = launch_hf_server(default_model_path, max_model_len=512)
    faulty = launch_hf_server(default_model_path, max_model_len=512, env=env)
    restarted = None
    servers = [HFServer(p.url, model_path=default_model_path, process=p) for p in (steady, faulty)]
    try:
        async with LLMClient([s.url for s in servers], health_interval=0.2, stall_timeout=DEADLINE_S) as llm:
            sync = WeightSync(servers, router=llm.router, timeout=DEADLINE_S)

            # 0. paused (SIGSTOP) while it generates: cut off, its requests retried on the other replica
            greedy = SamplingParams(max_tokens=48, temperature=0.0)
            jobs = [asyncio.ensure_future(llm.generate(list(range(100, 140)), greedy, f"s{i}")) for i in range(8)]
            await wait_busy(faulty.url, "running")
            os.kill(faulty.process.pid, signal.SIGSTOP)
            stopped = time.monotonic()
            while not llm.router.dead:
                await asyncio.sleep(0.05)
            detected = time.monotonic() - stopped
            outs = await asyncio.gather(*jobs)
            assert detected < 2 * DEADLINE_S and {o.replica for o in outs} == {servers[0].url}
            os.kill(faulty.process.pid, signal.SIGCONT)
            back = await wait_taken_back(llm)
            what = f"replica cut off, its requests retried elsewhere; back in {back:.1f} s"
            report("sigstop while generating", detected, what)

            await asyncio.to_thread(sync.push, version_state(base_state, 1), 1)

            # 1. paused (SIGSTOP) while it holds version 2's push
            push = asyncio.ensure_future(asyncio.to_thread(sync.push, version_state(base_state, 2), 2))
            await wait_busy(faulty.url, "weights_pending")
            os.kill(faulty.process.pid, signal.SIGSTOP)
            stopped = time.monotonic()
            await push
            detected = time.monotonic() - stopped
            assert detected < 2 * DEADLINE_S and llm.router.dead == [servers[1].url]
            os.kill(faulty.process.pid, signal.SIGCONT)
            back = await wait_taken_back(llm)
            assert servers[1].served_version() == 2
            expected = weights_digest(cast_state(version_state(base_state, 2), torch.float32))
            assert held_by(servers[1]) == held_by(servers[0]) == expected
            report("sigstop", detected, f"replica dropped; after SIGCONT taken back at version 2 in {back:.1f} s")

            # 2. killed (SIGKILL) while it holds version 3's push, then restarted on its port
            push = asyncio.ensure_future(asyncio.to_thread(sync.push, version_state(base_state, 3), 3))
            await wait_busy(faulty.url, "weights_pending")
            faulty.process.kill()
            killed = time.monotonic()
            await push
            detected = time.monotonic() - killed
            assert detected < 2 * DEADLINE_S and llm.router.dead == [servers[1].url]
            restarted = await asyncio.to_thread(
                launch_hf_server, default_model_path, faulty.port, max_model_len=512, env=env
            )
            back = await wait_taken_back(llm)
            assert servers[1].served_version() == 3 and sync.last.full_servers >= 1  # a full push: it lost its base
            assert held_by(servers[1]) == weights_digest(cast_state(version_state(base_state, 3), torch.float32))
            report("sigkill", detected, f"replica dropped; restarted, caught up with a full push in {back:.1f} s")
            sync.close()
    finally:
        for process in (steady, faulty, restarted):
            if process is not None:
                with_stop(process)


def with_stop(process) -> None:
    if process.process.poll() is None:
        os.kill(process.process.pid, signal.SIGCONT)
    process.stop()


async def test_a_server_on_another_host_cut_off_mid_push_is_routed_around_and_caught_up(
    default_model_path, base_state, docker_client
):
    from docker.types import IPAMConfig, IPAMPool

    from benchmarks.servers import hf_server_in_docker

    labels = owner_labels("test-weight-faults")
    subnet = IPAMConfig(pool_configs=[IPAMPool(subnet="172.29.77.0/24")])
    network = docker_client.networks.create("agentrl-test-faults", driver="bridge", ipam=subnet, labels=labels)
    steady = launch_hf_server(default_model_path, max_model_len=512)
    try:
        env = {FAULT_WEIGHTS_DELAY_ENV: str(HOLD_S)}
        with hf_server_in_docker(default_model_path, 512, labels=labels, network=network.name, env=env) as remote:
            servers = [HFServer(steady.url, model_path=default_model_path, process=steady), remote]
            address = remote.url.split("//")[1].split(":")[0]
            async with LLMClient([s.url for s in servers], health_interval=0.2) as llm:
                sync = WeightSync(servers, router=llm.router, timeout=DEADLINE_S)
                await asyncio.to_thread(sync.push, version_state(base_state, 1), 1)
                push = asyncio.ensure_future(asyncio.to_thread(sync.push, version_state(base_state, 2), 2))
                await wait_busy(remote.url, "weights_pending")
                network.disconnect(remote.container)
                cut = time.monotonic()
                await push
                detected = time.monotonic() - cut
                assert detected < 2 * DEADLINE_S and llm.router.dead == [remote.url]
                network.connect(remote.container, ipv4_address=address)
                back = await wait_taken_back(llm)
                assert remote.served_version() == 2
                assert held_by(remote) == weights_digest(cast_state(version_state(base_state, 2), torch.float32))
                report("network", detected, f"replica dropped; reconnected, taken back at version 2 in {back:.1f} s")
                sync.close()
    finally:
        steady.stop()
        network.remove()
