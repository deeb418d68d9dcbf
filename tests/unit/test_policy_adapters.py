"""Policies as LoRA adapters of one base model (`policies.X.lora_of`): their config views, the checks at load, and
the adapter the trainer pushes, which the `hf` server serves as the trainer's own model."""

import pytest
import torch
from transformers import LlamaForCausalLM

from agentrl.config.errors import ConfigError
from agentrl.config.loader import load_config
from agentrl.config.policies import policy_config
from agentrl.errors import UserError
from agentrl.rollout.servers.hf.engine import EngineConfig, HFEngine
from agentrl.trainer.backend import LocalBackend
from tests.trainer_cases import batch_of_trajectories, run_config, tiny_model_dir

TWO_ADAPTERS = (
    "policies={base: {trainable: false, rollout: {num_replicas: 2}}, "
    "describer: {lora_of: base, trainer: {lora_rank: 8, lr: 1.0e-4}}, guesser: {lora_of: base}}"
)


def test_an_adapter_has_its_bases_model_and_servers_and_its_own_trainer_settings():
    cfg = load_config("quickstart", [TWO_ADAPTERS, "trainer.lora_rank=4", "model=some/model"])
    base, describer, guesser = (policy_config(cfg, n) for n in ("base", "describer", "guesser"))
    assert base.rollout.lora_adapter is None and base.rollout.num_replicas == 2
    assert (describer.rollout.lora_adapter, guesser.rollout.lora_adapter) == ("describer", "guesser")
    assert describer.rollout.num_replicas == guesser.rollout.num_replicas == 2  # the base's servers
    assert (describer.trainer.lora_rank, describer.trainer.lr) == (8, 1.0e-4)
    assert guesser.trainer.lora_rank == 4  # the run's
    assert describer.model == guesser.model == "some/model"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["policies={a: {lora_of: nope, trainer: {lora_rank: 4}}, b: {trainable: false}}"], "lora_of='nope': name"),
        (["policies={a: {lora_of: a, trainer: {lora_rank: 4}}, b: {trainable: false}}"], "one without lora_of"),
        (["policies={a: {lora_of: b, trainer: {lora_rank: 4}}, b: {}}"], "set policies.b.trainable: false"),
        (["policies={a: {lora_of: b}, b: {trainable: false}}"], "set policies.a.trainer.lora_rank"),
        (
            ["policies={a: {lora_of: b, trainer: {lora_rank: 4}, rollout: {num_replicas: 2}}, b: {trainable: false}}"],
            "set num_replicas under policies.b.rollout",
        ),
        (
            ["policies={a: {lora_of: b, trainer: {lora_rank: 4}}, b: {trainable: false, rollout: {backend: vllm}}}"],
            "served by the hf backend",
        ),
        (
            ["policies={a: {lora_of: b, trainer: {lora_rank: 4}, model: other}, b: {trainable: false}}"],
            "an adapter sits on policies.b's model",
        ),
        (
            ["policies={a: {lora_of: b, trainable: false}, c: {}, b: {trainable: false}}"],
            "a frozen adapter is its base model itself",
        ),
        (["policies={a: {rollout: {lora_adapter: x}}}"], "with its lora_of: POLICY"),
        (["policies={a: {}}", "rollout.lora_adapter=x"], "make a policy an adapter with policies.X.lora_of"),
        (["rollout.lora_adapter=x"], "rollout.lora_adapter: an adapter trains LoRA"),
        (["rollout.lora_adapter=x", "trainer.lora_rank=4", "rollout.placement=ray"], "rollout.placement=local"),
    ],
)
def test_bad_adapters_are_refused_at_load_with_the_fix(overrides, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.").replace("(", r"\(")):
        load_config("quickstart", overrides)


def test_one_policy_may_be_served_as_an_adapter():
    cfg = load_config("quickstart", ["rollout.lora_adapter=policy", "trainer.lora_rank=4"])
    assert cfg.rollout.lora_adapter == "policy"


async def test_the_pushed_adapter_served_over_the_base_gives_the_trainers_own_logprobs(tmp_path, tokenizer):
    model_dir = tiny_model_dir(tmp_path)
    cfg = run_config(lora_rank=4, lora_alpha=8.0)
    cfg = cfg.model_copy(update={"rollout": cfg.rollout.model_copy(update={"lora_adapter": "a"})})
    backend = LocalBackend(cfg, model_dir, pad_token_id=0)
    backend.step(batch_of_trajectories())
    state = backend.state_dict()
    assert state and all(k.endswith((".lora_A.weight", ".lora_B.weight")) for k in state)
    assert not any(k.startswith("base_model") or ".default." in k for k in state)

    engine = HFEngine(LlamaForCausalLM.from_pretrained(model_dir).eval(), tokenizer, EngineConfig(max_batch_size=4))
    engine.core.eos_ids = frozenset()
    engine.start()
    try:
        assert await engine.update_weights(state, version=1, adapter="a", lora_alpha=8.0) == 1
        prompt = [3, 5, 7, 11, 13]
        out = await engine.generate(prompt, _greedy(), adapter="a")
        base = await engine.generate(prompt, _greedy())
    finally:
        engine.shutdown()
    ids = torch.tensor([prompt + out.token_ids])
    with torch.no_grad():
        logits = backend.engine.model(input_ids=ids).logits[0, len(prompt) - 1 : -1]
    trainer_logprobs = logits.log_softmax(-1).gather(1, ids[0, len(prompt) :, None])[:, 0].tolist()
    assert out.policy_version == 1 and out.token_ids != base.token_ids
    assert max(abs(a - b) for a, b in zip(out.logprobs, trainer_logprobs, strict=True)) < 1e-4


def _greedy():
    from agentrl.rollout.protocol import SamplingParams

    return SamplingParams(temperature=0.0, max_tokens=8)


async def test_adapters_start_no_server_and_ask_their_bases_servers_by_name(monkeypatch):
    import contextlib

    from agentrl.loops.policy_clients import serve_policies
    from agentrl.rollout.handles import AdapterServer, HFServer

    started, clients = [], []

    @contextlib.asynccontextmanager
    async def fake_servers(cfg, model_path):
        started.append(cfg.rollout.num_replicas)
        yield [HFServer(f"http://127.0.0.1:{9000 + i}") for i in range(cfg.rollout.num_replicas)]

    @contextlib.asynccontextmanager
    async def fake_client(urls, rollout):
        clients.append((urls, rollout.lora_adapter))
        yield f"client of {rollout.lora_adapter}"

    monkeypatch.setattr("agentrl.rollout.serve.rollout_servers", fake_servers)
    monkeypatch.setattr("agentrl.rollout.client.rollout_client", fake_client)
    cfg = load_config("quickstart", [TWO_ADAPTERS, "trainer.lora_rank=4"])
    with pytest.raises(UserError, match="describer, guesser: served as LoRA adapters"):  # eval, rollout, gateway
        async with serve_policies(cfg):
            pass
    assert started == []
    async with serve_policies(cfg, trains=True) as (llm, served):
        assert started == [2]  # the base's servers only
        assert [p.name for p in served] == ["base", "describer", "guesser"]
        base, describer, _ = served
        assert all(isinstance(s, AdapterServer) and s.adapter == "describer" for s in describer.servers)
        assert [s.server for s in describer.servers] == base.servers  # the very same servers
        assert llm.client("guesser") == "client of guesser"
    urls = ["http://127.0.0.1:9000", "http://127.0.0.1:9001"]
    assert sorted(clients, key=str) == sorted([(urls, None), (urls, "describer"), (urls, "guesser")], key=str)


def test_an_adapter_of_other_than_linear_layers_is_refused_not_dropped():
    from agentrl.trainer.lora import adapter_state

    state = {
        "base_model.model.model.embed_tokens.lora_embedding_A.default": torch.zeros(4, 64),
        "base_model.model.model.embed_tokens.base_layer.weight": torch.zeros(64, 32),
    }
    with pytest.raises(UserError, match="lora_embedding_A.default as an adapter: only linear-layer"):
        adapter_state(state)


async def test_a_request_that_needs_an_adapter_not_loaded_yet_is_retryable(tokenizer):
    import httpx

    from agentrl.rollout.servers.hf.app import create_app
    from tests.unit.test_hf_engine import tiny_llama

    engine = HFEngine(tiny_llama(), tokenizer, EngineConfig(max_batch_size=4))
    app = create_app(engine, "tiny")
    body = {"prompt": [5, 6, 7], "max_tokens": 2, "temperature": 0, "return_token_ids": True}
    try:
        engine.start()
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://hf") as http:
            answer = await http.post("/v1/completions", json={**body, "model": "a", "lora_adapter": "a"})
            assert answer.status_code == 503 and "'a' is not loaded on this server yet" in answer.text
            assert (await http.post("/v1/completions", json={**body, "model": "a"})).status_code == 200  # the base
    finally:
        engine.shutdown()
