"""Rollout servers as Ray actors on a simulated two-node cluster (`ray.cluster_utils.Cluster` on this machine):
the server actor is placed on the second node by a custom resource, serves requests at that node's address, and
receives weights through the object store (the trainer writes no file for it)."""

from __future__ import annotations

import asyncio
import os
import time

import httpx
import pytest
import torch

from agentrl.config.loader import load_config
from agentrl.ray_cluster import FORWARDED_ENV
from agentrl.rollout import LLMClient, SamplingParams
from agentrl.rollout.serve import rollout_servers
from agentrl.trainer.sync import StagedWeights, WeightSync

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def two_node_cluster():
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    second = cluster.add_node(num_cpus=1, resources={"rollout_node": 1})
    env = {k: os.environ[k] for k in FORWARDED_ENV if k in os.environ}
    ray.init(address=cluster.address, runtime_env={"env_vars": env}, log_to_driver=False)
    yield second.node_id
    ray.shutdown()
    cluster.shutdown()


async def test_a_server_actor_on_the_second_node_gets_weights_through_the_object_store(
    two_node_cluster, default_model_path, default_tokenizer, monkeypatch
):
    from safetensors.torch import load_file

    cfg = load_config(
        overrides=[
            "rollout.placement=ray",
            "rollout.num_cpus_per_replica=1",
            "rollout.replica_resources={rollout_node: 1}",
            "rollout.max_model_len=512",
        ],
    )
    written: list[bool] = []
    real_init = StagedWeights.__init__

    def spy(self, state, *, file, object_store, **options):
        written.append(file)
        real_init(self, state, file=file, object_store=object_store, **options)

    monkeypatch.setattr(StagedWeights, "__init__", spy)
    state = load_file(f"{default_model_path}/model.safetensors")
    state["model.norm.weight"] *= 1.5  # version 1: weights whose logprobs differ
    greedy = SamplingParams(max_tokens=8, temperature=0.0)
    prompt = default_tokenizer("The capital of France is").input_ids
    async with rollout_servers(cfg, default_model_path) as servers:
        (server,) = servers
        assert server.node_id == two_node_cluster  # placed on the second node
        assert server.weights_via == "object_store"
        async with LLMClient([server.url]) as llm:
            before = await llm.generate(prompt, greedy)
            sync = WeightSync(servers, router=llm.router)
            await asyncio.to_thread(sync.push, state, 1)
            after = await llm.generate(prompt, greedy)
            sync.close()
        assert written == [False]  # no file in this machine's /dev/shm: the blob went by the object store
        assert server.served_version() == 1 == server.policy_version
        assert httpx.get(f"{server.url}/v1/weights/version").json()["policy_version"] == 1
        assert max(abs(a - b) for a, b in zip(after.logprobs, before.logprobs, strict=False)) > 1e-2
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{server.url}/health", timeout=2)  # stopped with the actor


async def test_weights_the_object_store_lost_mid_push_are_staged_again(
    two_node_cluster, default_model_path, monkeypatch
):
    """The push's blob is lost before the server actor reads it (its owner, a helper actor, dies: the store drops
    it); the push stages the weights again and the server ends up holding them bit for bit."""
    import ray
    from safetensors.torch import load_file

    from agentrl.weight_delta import cast_state, weights_digest

    @ray.remote(num_cpus=0)
    class Owner:
        def put(self, blob: bytes) -> list:
            return [ray.put(blob)]  # this actor owns the object: it is lost when the actor dies

        def ping(self) -> None:
            return None

    lost: list[float] = []
    staged: list[bool] = []
    real_init = StagedWeights.__init__

    def losing(self, state, **options):
        real_init(self, state, **options)
        staged.append(self.ref is not None)
        if self.ref is not None and not lost:
            owner = Owner.remote()
            self.ref = ray.get(owner.put.remote(ray.get(self.ref)))[0]
            ray.kill(owner)
            with pytest.raises(ray.exceptions.RayActorError):
                for _ in range(100):  # until the owner is gone (a kill is asynchronous)
                    ray.get(owner.ping.remote(), timeout=10)
                    time.sleep(0.1)
            with pytest.raises(ray.exceptions.ObjectLostError):
                for _ in range(60):  # until the store says so too
                    ray.get(self.ref, timeout=10)
                    time.sleep(0.5)
            lost.append(time.monotonic())

    monkeypatch.setattr(StagedWeights, "__init__", losing)
    cfg = load_config(
        overrides=["rollout.placement=ray", "rollout.replica_resources={rollout_node: 1}", "rollout.max_model_len=512"]
    )
    state = load_file(f"{default_model_path}/model.safetensors")
    state["model.norm.weight"] *= 1.5
    async with rollout_servers(cfg, default_model_path) as servers:
        (server,) = servers
        sync = WeightSync(servers, timeout=120)
        await asyncio.to_thread(sync.push, state, 1)
        recovered = time.monotonic() - lost[0]
        assert staged == [True, True], "the lost blob was not staged again"
        assert server.served_version() == 1
        assert server.weights_digest() == weights_digest(cast_state(state, torch.float32))
        print(f"FAULT object store: the lost weights staged again and loaded in {recovered:.1f} s")
        sync.close()
