"""LoRA adapters on the `hf` server (`policies.X.lora_of`): one base model, an adapter per request, mixed batches,
a version per adapter; each adapter's rows generate what a model with the adapter merged in generates."""

from __future__ import annotations

import asyncio

import httpx
import pytest
import torch
from safetensors.torch import save

from agentrl.rollout.servers.hf.app import create_app
from agentrl.rollout.servers.hf.engine import EngineConfig, HFEngine
from agentrl.rollout.servers.hf.request import RequestError
from agentrl.rollout.servers.hf.weights import WeightUpdateError
from agentrl.trainer.lora import merge_lora
from tests.unit.test_hf_engine import PROMPTS, greedy, tiny_llama

MODULES = ("q_proj", "v_proj")
ALPHA = 8.0


def adapter(seed: int, rank: int = 4) -> dict[str, torch.Tensor]:
    """Random LoRA tensors (B non-zero, so the adapter changes the outputs) under the base model's module names."""
    torch.manual_seed(seed)
    state = {}
    for layer in range(2):
        for module in MODULES:
            out_features = 64 if module == "q_proj" else 32
            name = f"model.layers.{layer}.self_attn.{module}"
            state[f"{name}.lora_A.weight"] = torch.randn(rank, 64) * 0.3
            state[f"{name}.lora_B.weight"] = torch.randn(out_features, rank) * 0.3
    return state


def merged(state: dict[str, torch.Tensor], rank: int = 4) -> dict[str, torch.Tensor]:
    """The base model with `state` merged in, as the trainer merges a peft model (`merge_lora`)."""
    peft_state = {}
    for key, value in tiny_llama().state_dict().items():
        module = key.removesuffix(".weight")
        if module.endswith(MODULES):
            peft_state[f"base_model.model.{module}.base_layer.weight"] = value
            for part in ("lora_A", "lora_B"):
                peft_state[f"base_model.model.{module}.{part}.default.weight"] = state[f"{module}.{part}.weight"]
        else:
            peft_state[f"base_model.model.{key}"] = value
    return merge_lora(peft_state, ALPHA / rank)


def started(tokenizer, model=None) -> HFEngine:
    engine = HFEngine(model if model is not None else tiny_llama(), tokenizer, EngineConfig(max_batch_size=8))
    engine.core.eos_ids = frozenset()
    engine.start()
    return engine


@pytest.fixture
async def served(tokenizer):
    """An engine serving the base model and adapters `a` and `b` (versions 1 and 5)."""
    engine = started(tokenizer)
    assert await engine.update_weights(adapter(1), version=1, adapter="a", lora_alpha=ALPHA) == 1
    assert await engine.update_weights(adapter(2), version=5, adapter="b", lora_alpha=ALPHA) == 5
    yield engine
    engine.shutdown()


def model_with(state: dict[str, torch.Tensor]) -> torch.nn.Module:
    model = tiny_llama()
    model.load_state_dict(state)
    return model.eval()


async def test_one_batch_mixes_the_base_and_two_adapters_each_as_its_merged_model(served: HFEngine, tokenizer):
    names = [None, "a", "b", "a", None, "b"]
    prompts = [PROMPTS[i % len(PROMPTS)] for i in range(len(names))]
    together = await asyncio.gather(
        *(served.generate(p, greedy(12), adapter=n) for p, n in zip(prompts, names, strict=True))
    )
    references = {None: tiny_llama(), "a": model_with(merged(adapter(1))), "b": model_with(merged(adapter(2)))}
    for prompt, name, out in zip(prompts, names, together, strict=True):
        alone = started(tokenizer, references[name])
        try:
            ref = await alone.generate(prompt, greedy(12))
        finally:
            alone.shutdown()
        assert out.token_ids == ref.token_ids, name
        assert max(abs(x - y) for x, y in zip(out.logprobs, ref.logprobs, strict=True)) < 1e-4
        assert out.policy_version == {None: 0, "a": 1, "b": 5}[name]
    assert together[1].token_ids != together[0].token_ids  # the adapter changes what is generated


async def test_an_adapter_update_changes_only_its_rows_and_its_version(served: HFEngine):
    before = {n: await served.generate(PROMPTS[1], greedy(8), adapter=n) for n in (None, "a", "b")}
    assert await served.update_weights(adapter(3), adapter="a", lora_alpha=ALPHA) == 2  # no version: the next
    after = {n: await served.generate(PROMPTS[1], greedy(8), adapter=n) for n in (None, "a", "b")}
    assert after["a"].token_ids != before["a"].token_ids and after["a"].policy_version == 2
    for name in (None, "b"):
        assert after[name].token_ids == before[name].token_ids
        assert after[name].policy_version == before[name].policy_version
    assert served.adapter_versions == {"a": 2, "b": 5} and served.policy_version == 0


async def test_a_full_update_replaces_the_base_under_the_adapters(served: HFEngine, tokenizer):
    other = tiny_llama(seed=7).state_dict()
    assert await served.update_weights(other, version=3) == 3
    out = await served.generate(PROMPTS[0], greedy(8))
    alone = started(tokenizer, tiny_llama(seed=7))
    try:
        assert out.token_ids == (await alone.generate(PROMPTS[0], greedy(8))).token_ids
    finally:
        alone.shutdown()
    assert out.policy_version == 3 and served.adapter_versions == {"a": 1, "b": 5}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda s: {**s, "model.norm.weight": torch.ones(64)}, "holds only"),
        (lambda s: {k: v for k, v in s.items() if "layers.0.self_attn.q_proj.lora_B" not in k}, "without both"),
        (lambda s: {**s, "model.layers.0.self_attn.q_proj.lora_A.weight": torch.zeros(2, 64)}, "ranks"),
        (lambda s: {k.replace("q_proj", "nope"): v for k, v in s.items()}, "not a linear layer"),
    ],
    ids=["base tensor", "unpaired", "two ranks", "unknown module"],
)
async def test_a_bad_adapter_is_refused_and_nothing_changes(served: HFEngine, change, message):
    before = await served.generate(PROMPTS[1], greedy(8))
    with pytest.raises(WeightUpdateError, match=message):
        await served.update_weights(change(adapter(4)), adapter="c", lora_alpha=ALPHA)
    assert served.adapter_versions == {"a": 1, "b": 5}
    with pytest.raises(RequestError, match="'c' is not loaded; loaded: \\['a', 'b'\\]"):
        await served.generate(PROMPTS[1], greedy(8), adapter="c")
    assert (await served.generate(PROMPTS[1], greedy(8))).token_ids == before.token_ids


async def test_an_adapter_keeps_its_rank_and_modules(served: HFEngine):
    before = await served.generate(PROMPTS[1], greedy(8), adapter="a")
    with pytest.raises(WeightUpdateError, match="keeps its rank"):
        await served.update_weights(adapter(4, rank=2), adapter="a", lora_alpha=ALPHA)
    fewer = {k: v for k, v in adapter(4).items() if "v_proj" not in k}
    with pytest.raises(WeightUpdateError, match="keeps its modules"):
        await served.update_weights(fewer, adapter="a", lora_alpha=ALPHA)
    after = await served.generate(PROMPTS[1], greedy(8), adapter="a")
    assert after.token_ids == before.token_ids and served.adapter_versions["a"] == 1


async def test_http_requests_pick_their_adapter_by_model_and_uploads_create_adapters(served: HFEngine):
    app = create_app(served, "tiny")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://hf") as http:
        body = {"prompt": PROMPTS[1], "max_tokens": 6, "temperature": 0, "return_token_ids": True}
        for model, name in (("a", "a"), ("tiny", None), ("", None), ("gpt-4o", None)):
            choice = (await http.post("/v1/completions", json={**body, "model": model})).json()["choices"][0]
            assert choice["token_ids"] == (await served.generate(PROMPTS[1], greedy(6), adapter=name)).token_ids
        headers = {"content-type": "application/octet-stream", "x-policy-version": "9", "x-adapter": "c"}
        answer = await http.post("/v1/weights", content=save(adapter(4)), headers={**headers, "x-lora-alpha": "8"})
        assert answer.json()["policy_version"] == 9
        assert (await http.get("/v1/weights/version", params={"adapter": "c"})).json()["policy_version"] == 9
        assert (await http.get("/v1/weights/version", params={"adapter": "zz"})).status_code == 404
        health = (await http.get("/health")).json()
        assert health["adapters"] == {"a": 1, "b": 5, "c": 9} and health["policy_version"] == 0
        models = [m["id"] for m in (await http.get("/v1/models")).json()["data"]]
        assert models == ["tiny", "a", "b", "c"]
        bad = await http.post("/v1/weights", content=save(adapter(4)), headers={**headers, "x-lora-alpha": "-1"})
        assert bad.status_code == 400 and "X-Lora-Alpha" in bad.json()["error"]["message"]
