"""Partial rollouts on the real `hf` server: a weight push (abort in flight) lands while a long generation runs;
the turn continues from its exact prefix with the new weights, the trajectory's generated segments carry both
versions, its tokens are exactly the concatenation of what the server generated, and the drift check passes."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from agentrl.config import AgentConfig, RolloutConfig
from agentrl.loops.drift import check_drift
from agentrl.loops.manager import RolloutManager
from agentrl.rollout import LLMClient
from agentrl.rollout.handles import HFServer
from agentrl.types import Sample

pytestmark = pytest.mark.integration


class Recording:
    """The rollout client, keeping every output it returned."""

    def __init__(self, llm: LLMClient) -> None:
        self.llm, self.outputs = llm, []

    async def generate(self, prompt_ids, sampling, session_id=None):
        out = await self.llm.generate(prompt_ids, sampling, session_id=session_id)
        self.outputs.append(out)
        return out


async def push_while_generating(server: HFServer, state, version: int) -> None:
    """Wait until the server is decoding, then push `state` as `version`, aborting what runs."""
    for _ in range(600):
        health = httpx.get(f"{server.url}/health", timeout=5).json()
        if health["running"] > 0:
            break
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.3)  # some tokens in
    await asyncio.to_thread(server.update_weights, state, version, "abort")


async def test_a_push_mid_generation_splits_the_turn_into_two_versions(
    hf_server_url, default_model_path, default_tokenizer, tmp_path
):
    from safetensors.torch import load_file, save_file

    server = HFServer(hf_server_url, model_path=default_model_path)
    weights = tmp_path / "model.safetensors"
    save_file(load_file(f"{default_model_path}/model.safetensors"), str(weights))  # the same weights, a new version
    start = server.served_version()
    rollout = RolloutConfig(n=1, weight_update="resume", max_tokens=160, temperature=0.0)
    agent = AgentConfig(max_total_tokens=1024)
    sample = Sample(id="count", prompt=[{"role": "user", "content": "Count from 1 to 100, separated by commas."}])
    async with LLMClient([hf_server_url]) as llm:
        recording = Recording(llm)
        manager = RolloutManager(recording, default_tokenizer, agent, rollout)
        rolling = asyncio.ensure_future(manager.run([sample]))
        await push_while_generating(server, str(weights), start + 1)
        (traj,) = await rolling
    generated = [s for s in traj.segments if s.trainable]
    print([(s.policy_version, len(s.token_ids)) for s in generated], traj.stop_reason)
    assert [s.policy_version for s in generated] == [start, start + 1]
    assert recording.outputs[0].finish_reason == "abort" and len(recording.outputs) == 2
    assert [s.token_ids for s in generated] == [out.token_ids for out in recording.outputs]
    assert [s.logprobs for s in generated] == [out.logprobs for out in recording.outputs]
    assert check_drift(default_tokenizer, traj).kind != "template"
    assert traj.metrics["rollout/resumed_generations"] == 1.0
