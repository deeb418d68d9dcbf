"""The built-in `hf` server with the real default model, over real HTTP, started as a subprocess."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch
from safetensors.torch import save_file

from agentrl.rollout.servers.hf import HFServerHandle, launch_hf_server
from agentrl.rollout.servers.hf.push import push_weights

pytestmark = pytest.mark.integration

QUESTION = [{"role": "user", "content": "Write a short poem about the sea."}]


@pytest.fixture(scope="module")
def model_path() -> str:
    from agentrl.errors import ModelNotFoundError
    from agentrl.models import resolve_model

    try:
        return resolve_model("default")
    except ModelNotFoundError as exc:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"default model unavailable: {exc}")
        pytest.skip(f"default model unavailable: {exc}")


@pytest.fixture(scope="module")
def server(model_path: str) -> Iterator[HFServerHandle]:
    handle = launch_hf_server(model_path, max_batch_size=32, startup_timeout=240)
    try:
        yield handle
    finally:
        handle.stop()


@pytest.fixture(scope="module")
def reference(model_path: str) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32).eval()
    return model, AutoTokenizer.from_pretrained(model_path)


@pytest.fixture(scope="module")
def prompt_ids(reference: tuple[Any, Any]) -> list[int]:
    _, tokenizer = reference
    text = tokenizer.apply_chat_template(QUESTION, add_generation_prompt=True, tokenize=False)
    return tokenizer(text, add_special_tokens=False).input_ids


def complete(server: HFServerHandle, prompt: list[int], **fields: Any) -> httpx.Response:
    body = {"prompt": prompt, "max_tokens": 50, "temperature": 0, "logprobs": 1, "return_token_ids": True}
    return httpx.post(f"{server.url}/v1/completions", json={**body, **fields}, timeout=120)


def greedy_choice(server: HFServerHandle, prompt: list[int], max_tokens: int = 50) -> dict[str, Any]:
    response = complete(server, prompt, max_tokens=max_tokens)
    assert response.status_code == 200, response.text
    return response.json()["choices"][0]


@pytest.fixture(scope="module")
def greedy50(server: HFServerHandle, prompt_ids: list[int]) -> dict[str, Any]:
    """The server's greedy completion (50 tokens, with logprobs) under the original weights."""
    return greedy_choice(server, prompt_ids)


def test_greedy_matches_transformers_generate(server, reference, prompt_ids, greedy50) -> None:
    model, _ = reference
    with torch.no_grad():
        ref = model.generate(torch.tensor([prompt_ids]), do_sample=False, max_new_tokens=50)
    expected = ref[0, len(prompt_ids) :].tolist()
    assert greedy50["token_ids"] == expected
    assert greedy50["prompt_token_ids"] == prompt_ids
    body = {"messages": QUESTION, "max_tokens": 20, "temperature": 0, "logprobs": True, "return_token_ids": True}
    chat = httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=120).json()
    assert chat["prompt_token_ids"] == prompt_ids
    assert chat["choices"][0]["token_ids"] == expected[:20]
    assert len(chat["choices"][0]["logprobs"]["content"]) == min(20, len(expected))
    assert chat["choices"][0]["message"]["content"].strip()


def test_logprobs_match_teacher_forcing(server, reference, prompt_ids, greedy50) -> None:
    model, _ = reference
    sampled = complete(server, prompt_ids, temperature=1.0, seed=11, max_tokens=30).json()["choices"][0]
    for label, choice in (("greedy", greedy50), ("sampled", sampled)):
        tokens, served = choice["token_ids"], choice["logprobs"]["token_logprobs"]
        with torch.no_grad():
            logits = model(torch.tensor([prompt_ids + tokens])).logits[0].float()
        logprobs = torch.log_softmax(logits, dim=-1)
        n = len(prompt_ids)
        forced = [logprobs[n - 1 + i, tok].item() for i, tok in enumerate(tokens)]
        diff = max(abs(a - b) for a, b in zip(forced, served, strict=True))
        print(f"logprob max abs diff vs teacher forcing ({label}, {len(tokens)} tokens): {diff:.2e}")
        assert diff < 1e-3


def test_32_concurrent_requests(server, reference) -> None:
    _, tokenizer = reference

    async def one(client: httpx.AsyncClient, i: int) -> dict[str, Any]:
        messages = [{"role": "user", "content": f"Give me {i + 2} words that rhyme with cat."}]
        body = {"messages": messages, "max_tokens": 16, "temperature": 1.0, "seed": i, "return_token_ids": True}
        response = await client.post(f"{server.url}/v1/chat/completions", json=body)
        assert response.status_code == 200, response.text
        return response.json()

    async def all_of_them() -> list[dict[str, Any]]:
        async with httpx.AsyncClient(timeout=300) as client:
            return await asyncio.gather(*(one(client, i) for i in range(32)))

    results = asyncio.run(all_of_them())
    for data in results:
        choice = data["choices"][0]
        ids = choice["token_ids"]
        assert 1 <= len(ids) <= 16
        if choice["finish_reason"] == "stop":  # the model ended its turn (no stop strings were asked for)
            assert ids[-1] == tokenizer.eos_token_id
        else:  # cut at max_tokens
            assert choice["finish_reason"] == "length" and len(ids) == 16 and ids[-1] != tokenizer.eos_token_id
        assert choice["message"]["content"] == tokenizer.decode(choice["token_ids"], skip_special_tokens=True)


def test_client_disconnect_aborts_the_request(server, prompt_ids) -> None:
    body = {"prompt": prompt_ids, "max_tokens": 4000, "temperature": 1.0, "ignore_eos": True}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{server.url}/v1/completions", json=body, timeout=httpx.Timeout(60, read=2.0))
    deadline = time.monotonic() + 30
    while httpx.get(f"{server.url}/health").json()["running"] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert httpx.get(f"{server.url}/health").json()["running"] == 0


def test_weight_update_changes_output_and_restores_exactly(
    server, reference, prompt_ids, greedy50, tmp_path: Path
) -> None:
    model, _ = reference
    original = {k: v.contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    perturbed = dict(original)
    for name in ("model.norm.weight", "model.layers.0.mlp.down_proj.weight"):
        perturbed[name] = original[name] * 1.5 + 0.01
    save_file(perturbed, tmp_path / "perturbed.safetensors")
    before = greedy50
    version = httpx.get(f"{server.url}/v1/weights/version").json()["policy_version"]

    start = time.perf_counter()
    body = {"path": str(tmp_path / "perturbed.safetensors"), "version": version + 1}
    update = httpx.post(f"{server.url}/v1/weights", json=body, timeout=120)
    print(f"weight update from file: {time.perf_counter() - start:.2f}s (server: {update.json()})")
    assert update.status_code == 200 and update.json()["policy_version"] == version + 1
    changed = greedy_choice(server, prompt_ids, max_tokens=20)
    assert changed["token_ids"] != before["token_ids"][:20]

    start = time.perf_counter()
    restored = push_weights(server.url, version + 2, state=model.state_dict())["policy_version"]
    print(f"weight update from bytes: {time.perf_counter() - start:.2f}s")
    assert restored == version + 2
    after = complete(server, prompt_ids).json()
    assert after["choices"][0]["token_ids"] == before["token_ids"]
    assert after["choices"][0]["logprobs"] == before["logprobs"]
    assert after["policy_version"] == version + 2
    assert httpx.get(f"{server.url}/v1/weights/version").json()["policy_version"] == version + 2


def test_too_long_prompt_is_rejected(server) -> None:
    limit = httpx.get(f"{server.url}/v1/models").json()["data"][0]["max_model_len"]
    response = complete(server, [42] * (limit + 1), max_tokens=8)
    assert response.status_code == 400
    message = response.json()["error"]["message"]
    assert f"maximum context length is {limit} tokens" in message and "in the prompt" in message
