"""The `hf` server's continuous-batching engine and HTTP app, on a tiny randomly initialised Llama."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator

import httpx
import pytest
import torch
from safetensors.torch import save
from transformers import LlamaConfig, LlamaForCausalLM

from agentrl.rollout.protocol import SamplingParams
from agentrl.rollout.servers.hf.app import create_app
from agentrl.rollout.servers.hf.engine import EngineConfig, HFEngine
from agentrl.rollout.servers.hf.request import GenerationOutput, RequestError
from agentrl.rollout.servers.hf.sampling import apply_top_k, apply_top_p
from agentrl.rollout.servers.hf.weights import WeightUpdateError

MAX_LEN = 128
PROMPTS = [[5, 6, 7], [40, 41, 42, 43, 44, 45, 46, 47, 48], [100] * 20, [9]]


def tiny_llama(seed: int = 0, vocab: int = 260) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=MAX_LEN,
        initializer_range=0.1,
        tie_word_embeddings=True,
        eos_token_id=None,
        bos_token_id=None,
        pad_token_id=None,
    )
    return LlamaForCausalLM(config).eval()


def make_engine(tokenizer, seed: int = 0, **config) -> HFEngine:
    engine = HFEngine(tiny_llama(seed), tokenizer, EngineConfig(**config))
    engine.core.eos_ids = frozenset()  # the random model would hit <|im_end|> at random
    engine.start()
    return engine


@pytest.fixture(scope="module")
def engine(tokenizer) -> Iterator[HFEngine]:
    eng = make_engine(tokenizer, max_batch_size=8)
    yield eng
    eng.shutdown()


def greedy(max_tokens: int = 16, **kw) -> SamplingParams:
    return SamplingParams(temperature=0.0, max_tokens=max_tokens, **kw)


async def wait_until(pred, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not pred():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.005)


async def test_batched_equals_alone_and_matches_generate(engine: HFEngine) -> None:
    alone = [await engine.generate(p, greedy()) for p in PROMPTS]
    together = await asyncio.gather(*(engine.generate(p, greedy()) for p in PROMPTS))
    for prompt, a, b in zip(PROMPTS, alone, together, strict=True):
        assert a.token_ids == b.token_ids
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True)) < 1e-4
        ref = engine.model.generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=16, min_new_tokens=16)
        assert ref[0, len(prompt) :].tolist() == a.token_ids
        assert a.finish_reason == "length" and len(a.token_ids) == 16
        assert a.prompt_token_ids == prompt and a.policy_version == 0


async def prefill_together(
    engine: HFEngine, blocker: SamplingParams, prompts: list[list[int]], params: list[SamplingParams]
) -> tuple[GenerationOutput, list[GenerationOutput], list[tuple[int, int]]]:
    """Hold the engine thread inside a blocker's prefill (PROMPTS[2]) while `prompts` arrive, so that the engine
    takes them in one prefill; the blocker's result, theirs, and the (rows, columns) of every prefill forward
    (decode steps feed one token a row). Shuts `engine` down."""
    entered, release = threading.Event(), threading.Event()
    prefilled: list[tuple[int, int]] = []

    def hold_first_prefill(_, args, kwargs) -> None:
        rows, width = kwargs["input_ids"].shape
        if width > 1:
            prefilled.append((rows, width))
            entered.set()
            release.wait(10)

    engine.model.register_forward_pre_hook(hold_first_prefill, with_kwargs=True)
    try:
        first = asyncio.ensure_future(engine.generate(PROMPTS[2], blocker))
        await asyncio.to_thread(entered.wait, 10)  # the engine thread is inside the blocker's prefill
        calls = [asyncio.ensure_future(engine.generate(p, s)) for p, s in zip(prompts, params, strict=True)]
        await asyncio.sleep(0.05)  # all of them wait: the engine takes them in one prefill
        release.set()
        together = await asyncio.gather(*calls)
        return await first, together, prefilled
    finally:
        release.set()
        engine.shutdown()


def assert_same_tokens(alone: list[GenerationOutput], together: list[GenerationOutput]) -> None:
    for a, b in zip(alone, together, strict=True):
        assert a.token_ids == b.token_ids
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True)) < 1e-4


async def test_a_repeated_prompt_is_prefilled_once_and_each_request_samples_its_own(
    engine: HFEngine, tokenizer
) -> None:
    prompts = [PROMPTS[1], PROMPTS[0], PROMPTS[1], PROMPTS[1], PROMPTS[0]]
    seeded = [SamplingParams(temperature=1.0, max_tokens=10, seed=i) for i in range(len(prompts))]
    alone = [await engine.generate(p, s) for p, s in zip(prompts, seeded, strict=True)]
    fresh = make_engine(tokenizer, max_batch_size=8)  # the fixture's weights
    _, together, prefilled = await prefill_together(fresh, greedy(2), prompts, seeded)
    assert_same_tokens(alone, together)
    assert [rows for rows, _ in prefilled] == [1, 2]  # the blocker, then the five's two distinct prompts, once each
    assert len({tuple(t.token_ids) for t in together}) > 2  # the repeats sampled apart


async def test_the_prefix_prompts_share_is_prefilled_once_with_the_tokens_of_each_prompt_alone(tokenizer) -> None:
    system = list(range(60, 80))  # a 20-token system prompt every prompt starts with
    prompts = [system + p for p in (PROMPTS[0], PROMPTS[1], PROMPTS[3])]
    fresh = make_engine(tokenizer, max_batch_size=8)
    alone = [await fresh.generate(p, greedy(10)) for p in [PROMPTS[2], *prompts]]
    # the blocker keeps running while the three join: its decode steps then run over the joined batch
    first, together, prefilled = await prefill_together(fresh, greedy(10), prompts, [greedy(10)] * 3)
    assert_same_tokens(alone, [first, *together])
    # the blocker; then the system prompt once, and the three prompts' remainders (up to 9 tokens) on top of it
    assert prefilled == [(1, 20), (1, 20), (3, 9)]


@pytest.mark.parametrize("temperature", [1.0, 0.7, 1.3])
async def test_logprobs_match_teacher_forcing_at_the_sampling_temperature(engine: HFEngine, temperature: float) -> None:
    out = await engine.generate(PROMPTS[1], SamplingParams(temperature=temperature, max_tokens=12, seed=3))
    ids = torch.tensor([PROMPTS[1] + out.token_ids])
    with torch.no_grad():
        logits = engine.model(ids).logits[0].float()
    n = len(PROMPTS[1])
    tempered = torch.log_softmax(logits / temperature, dim=-1)
    expected = [tempered[n - 1 + i, t].item() for i, t in enumerate(out.token_ids)]
    assert max(abs(a - b) for a, b in zip(expected, out.logprobs, strict=True)) < 1e-4
    if temperature != 1.0:  # the raw distribution's logprobs are not what was sampled from
        raw = torch.log_softmax(logits, dim=-1)
        untempered = [raw[n - 1 + i, t].item() for i, t in enumerate(out.token_ids)]
        assert max(abs(a - b) for a, b in zip(untempered, out.logprobs, strict=True)) > 1e-2


async def test_logprobs_are_of_the_truncated_distribution_under_top_k(engine: HFEngine) -> None:
    out = await engine.generate(PROMPTS[0], SamplingParams(temperature=0.8, top_k=3, max_tokens=10, seed=1))
    ids = torch.tensor([PROMPTS[0] + out.token_ids])
    with torch.no_grad():
        scores = engine.model(ids).logits[0].float() / 0.8
    n = len(PROMPTS[0])
    for i, (token, logprob) in enumerate(zip(out.token_ids, out.logprobs, strict=True)):
        row = scores[n - 1 + i]
        kept = row.topk(3).indices
        assert token in kept.tolist()  # only the top 3 are ever drawn
        assert logprob == pytest.approx(
            torch.log_softmax(row[kept], dim=-1)[kept.tolist().index(token)].item(), abs=1e-4
        )


async def test_requests_join_and_leave_mid_run(engine: HFEngine) -> None:
    alone = [await engine.generate(p, greedy(8 + 6 * i)) for i, p in enumerate(PROMPTS)]
    first = asyncio.ensure_future(engine.generate(PROMPTS[2], greedy(40)))
    await wait_until(lambda: engine.core.running and len(engine.core.running[0].output_ids) >= 5)
    late = [asyncio.ensure_future(engine.generate(p, greedy(8 + 6 * i))) for i, p in enumerate(PROMPTS)]
    results = await asyncio.gather(*late)
    long_run = await first
    assert [r.token_ids for r in results] == [a.token_ids for a in alone]
    assert long_run.token_ids[: len(alone[2].token_ids)] == alone[2].token_ids
    assert engine.num_running == 0


async def test_abort_by_id_and_all(engine: HFEngine) -> None:
    task = asyncio.ensure_future(engine.generate(PROMPTS[0], greedy(100), request_id="victim"))
    other = asyncio.ensure_future(engine.generate(PROMPTS[1], greedy(10)))
    await wait_until(lambda: any(len(r.output_ids) >= 2 for r in engine.core.running))
    assert engine.abort("victim") == 1
    out = await task
    assert out.finish_reason == "abort" and 2 <= len(out.token_ids) < 100
    assert len(out.logprobs) == len(out.token_ids)
    assert (await other).finish_reason == "length"
    tasks = [asyncio.ensure_future(engine.generate(p, greedy(100))) for p in PROMPTS]
    await wait_until(lambda: engine.num_running == len(PROMPTS))
    engine.abort()
    assert {o.finish_reason for o in await asyncio.gather(*tasks)} == {"abort"}


async def test_cancelling_the_caller_aborts(engine: HFEngine) -> None:
    task = asyncio.ensure_future(engine.generate(PROMPTS[0], greedy(100)))
    await wait_until(lambda: engine.num_running == 1)
    task.cancel()
    await wait_until(lambda: engine.num_running == 0)


async def test_finish_reasons(engine: HFEngine, tokenizer) -> None:
    ref = await engine.generate(PROMPTS[1], greedy(20))
    stop_id = ref.token_ids[5]
    cut = ref.token_ids.index(stop_id) + 1
    by_id = await engine.generate(PROMPTS[1], greedy(20, stop_token_ids=[stop_id]))
    assert (by_id.finish_reason, by_id.stop_reason, by_id.token_ids) == ("stop", stop_id, ref.token_ids[:cut])
    engine.core.eos_ids = frozenset({stop_id})
    try:
        by_eos = await engine.generate(PROMPTS[1], greedy(20))
        ignored = await engine.generate(PROMPTS[1], greedy(20), ignore_eos=True)
    finally:
        engine.core.eos_ids = frozenset()
    assert (by_eos.finish_reason, by_eos.stop_reason, by_eos.token_ids) == ("stop", None, ref.token_ids[:cut])
    assert ignored.token_ids == ref.token_ids
    text = tokenizer.decode(ref.token_ids, skip_special_tokens=True)
    stop = text[len(text) // 2 : len(text) // 2 + 2]
    by_str = await engine.generate(PROMPTS[1], greedy(20, stop=[stop]))
    assert by_str.finish_reason == "stop" and by_str.stop_reason == stop
    assert by_str.text == text[: text.index(stop)]
    assert by_str.token_ids == ref.token_ids[: len(by_str.token_ids)]
    assert ref.finish_reason == "length" and ref.text == text


async def test_seeded_sampling_is_reproducible(engine: HFEngine) -> None:
    def params(seed: int) -> SamplingParams:
        return SamplingParams(temperature=1.0, top_p=0.9, top_k=50, max_tokens=24, seed=seed)

    a = await engine.generate(PROMPTS[0], params(7))
    b, c, d = await asyncio.gather(*(engine.generate(PROMPTS[0], params(s)) for s in (7, 7, 8)))
    assert a.token_ids == b.token_ids == c.token_ids
    assert d.token_ids != a.token_ids


def test_top_k_and_top_p_filters() -> None:
    scores = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05], [0.25, 0.25, 0.25, 0.25]]))
    top_k = apply_top_k(scores, [2, -1])
    assert torch.isinf(top_k[0, 2:]).all() and torch.isfinite(top_k[0, :2]).all()
    assert torch.equal(top_k[1], scores[1])
    top_p = apply_top_p(scores, [0.7, 1.0])
    assert torch.isfinite(top_p[0, :2]).all() and torch.isinf(top_p[0, 2:]).all()
    assert torch.isfinite(apply_top_p(scores, [0.1, 0.1])[:, 0]).all()  # the best token always survives


async def test_too_long_and_invalid_prompts_are_rejected(engine: HFEngine) -> None:
    with pytest.raises(RequestError, match="maximum context length is 128"):
        await engine.generate([1] * 100, greedy(29))
    with pytest.raises(RequestError, match="out of range"):
        await engine.generate([1, 10_000], greedy())
    with pytest.raises(RequestError, match="empty"):
        await engine.generate([], greedy())
    assert len((await engine.generate([1] * 100, greedy(28))).token_ids) == 28


async def test_weight_update_changes_and_restores(tokenizer) -> None:
    engine = make_engine(tokenizer)
    try:
        original = {k: v.clone() for k, v in engine.model.state_dict().items() if k != "lm_head.weight"}
        before = await engine.generate(PROMPTS[1], greedy())
        other = tiny_llama(seed=1).state_dict()
        assert await engine.update_weights(other) == 1
        changed = await engine.generate(PROMPTS[1], greedy())
        assert changed.token_ids != before.token_ids and changed.policy_version == 1
        with pytest.raises(WeightUpdateError, match="missing"):
            await engine.update_weights({"model.norm.weight": original["model.norm.weight"]})
        running = asyncio.ensure_future(engine.generate(PROMPTS[0], greedy(100)))
        await wait_until(lambda: engine.num_running == 1)
        assert await engine.update_weights(original, version=7, in_flight="abort") == 7
        assert (await running).finish_reason == "abort"
        after = await engine.generate(PROMPTS[1], greedy())
        assert after.token_ids == before.token_ids and after.logprobs == before.logprobs
        assert after.policy_version == engine.policy_version == 7
    finally:
        engine.shutdown()


async def test_weight_update_waits_for_in_flight(tokenizer) -> None:
    engine = make_engine(tokenizer)
    try:
        running = asyncio.ensure_future(engine.generate(PROMPTS[0], greedy(60)))
        await wait_until(lambda: engine.num_running == 1)
        update = asyncio.ensure_future(engine.update_weights(tiny_llama(seed=2).state_dict()))
        queued = asyncio.ensure_future(engine.generate(PROMPTS[1], greedy(4)))
        first = await running
        assert first.finish_reason == "length" and first.policy_version == 0
        assert await update == 1 and (await queued).policy_version == 1
    finally:
        engine.shutdown()


@pytest.fixture
async def http(engine: HFEngine) -> httpx.AsyncClient:
    app = create_app(engine, "tiny")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://hf") as client:
        yield client


async def test_http_completions_and_chat(http: httpx.AsyncClient, engine: HFEngine) -> None:
    ref = await engine.generate(PROMPTS[1], greedy(8))
    body = {"prompt": PROMPTS[1], "max_tokens": 8, "temperature": 0, "logprobs": 2, "return_token_ids": True}
    choice = (await http.post("/v1/completions", json=body)).json()["choices"][0]
    assert choice["token_ids"] == ref.token_ids and choice["prompt_token_ids"] == PROMPTS[1]
    assert choice["logprobs"]["token_logprobs"] == pytest.approx(ref.logprobs, abs=1e-5)
    assert len(choice["logprobs"]["top_logprobs"]) == 8 and choice["finish_reason"] == "length"
    messages = [{"role": "user", "content": "hi"}]
    chat_body = {"messages": messages, "max_tokens": 5, "temperature": 0, "logprobs": True, "top_logprobs": 2}
    data = (await http.post("/v1/chat/completions", json={**chat_body, "return_token_ids": True})).json()
    choice = data["choices"][0]
    assert data["prompt_token_ids"][-3:] == http_tokens(engine, "assistant\n")
    assert [c["logprob"] for c in choice["logprobs"]["content"]] == pytest.approx(
        (await engine.generate(data["prompt_token_ids"], greedy(5))).logprobs, abs=1e-5
    )
    assert choice["message"]["role"] == "assistant" and len(choice["token_ids"]) == 5
    assert data["policy_version"] == engine.policy_version
    served = (await http.get("/v1/weights/version")).json()
    assert served == {"policy_version": engine.policy_version, "weights_id": engine.weights_id, "dtype": "float32"}
    assert (await http.get("/v1/models")).json()["data"][0]["id"] == "tiny"


async def test_a_streamed_completion_is_the_same_completion_in_chunks(http: httpx.AsyncClient, engine: HFEngine):
    body = {"prompt": PROMPTS[1], "max_tokens": 30, "temperature": 0, "logprobs": 1, "return_token_ids": True}
    whole = (await http.post("/v1/completions", json=body)).json()
    answer = await http.post("/v1/completions", json={**body, "stream": True})
    assert answer.headers["content-type"].startswith("text/event-stream")
    lines = [line.removeprefix("data: ") for line in answer.text.splitlines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    chunks = [json.loads(line)["choices"][0] for line in lines[:-1]]
    assert len([c for c in chunks if c["token_ids"]]) > 1  # tokens went out as they were sampled
    expected = whole["choices"][0]
    assert [t for c in chunks for t in c["token_ids"]] == expected["token_ids"]
    logprobs = [lp for c in chunks for lp in c["logprobs"]["token_logprobs"]]
    assert logprobs == pytest.approx(expected["logprobs"]["token_logprobs"], abs=1e-5)
    assert "".join(c["text"] for c in chunks) == expected["text"]
    assert chunks[0]["prompt_token_ids"] == PROMPTS[1] and chunks[-1]["finish_reason"] == "length"
    assert json.loads(lines[-2])["policy_version"] == engine.policy_version


async def test_engine_stream_yields_tokens_before_the_output_and_aborts_when_left(engine: HFEngine) -> None:
    events = [event async for event in engine.stream(PROMPTS[0], greedy(30))]
    *batches, output = events
    assert isinstance(output, GenerationOutput) and len(batches) > 1
    assert [t for batch in batches for t, _, _ in batch] == output.token_ids
    stream = engine.stream(PROMPTS[0], greedy(100))
    await anext(stream)
    await stream.aclose()  # the reader went away: the request is aborted, not run to its end
    await wait_until(lambda: engine.num_running == 0)


def http_tokens(engine: HFEngine, text: str) -> list[int]:
    return engine.tokenizer(text, add_special_tokens=False).input_ids[-3:]


async def test_http_abort(http: httpx.AsyncClient, engine: HFEngine) -> None:
    body = {"prompt": PROMPTS[0], "max_tokens": 100, "temperature": 0, "request_id": "abort-me"}
    pending = asyncio.ensure_future(http.post("/v1/completions", json=body))
    # by its id: a stream an earlier test left is aborted when the engine sees its reader gone, a step later
    await wait_until(lambda: any(r.request_id == "abort-me" for r in engine.core.running))
    assert (await http.post("/v1/abort", json={"request_id": "abort-me"})).json() == {"aborted": 1}
    choice = (await pending).json()["choices"][0]
    assert choice["finish_reason"] == "abort"
    assert (await http.post("/v1/abort", json={})).json() == {"aborted": 0}


async def test_http_errors(http: httpx.AsyncClient) -> None:
    too_long = await http.post("/v1/completions", json={"prompt": [1] * 120, "max_tokens": 20})
    assert too_long.status_code == 400
    assert "maximum context length" in too_long.json()["error"]["message"]
    chat = {"messages": [{"role": "user", "content": "x"}], "stream": True}
    stream = await http.post("/v1/chat/completions", json=chat)
    assert stream.status_code == 400 and "streams /v1/completions only" in stream.json()["error"]["message"]
    long_stream = await http.post("/v1/completions", json={"prompt": [1] * 120, "max_tokens": 20, "stream": True})
    assert long_stream.status_code == 400 and "maximum context length" in long_stream.json()["error"]["message"]
    bad = await http.post("/v1/completions", json={"prompt": [1], "temperature": -1})
    assert bad.status_code == 400
    missing = await http.post("/v1/completions", json={"max_tokens": 3})
    assert missing.status_code == 400


async def test_http_weight_update_from_bytes(tokenizer) -> None:
    engine = make_engine(tokenizer)
    app = create_app(engine, "tiny")
    body = save({k: v.contiguous() for k, v in tiny_llama(seed=3).state_dict().items() if k != "lm_head.weight"})
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://hf") as http:
            headers = {"content-type": "application/octet-stream", "x-policy-version": "5"}
            ok = await http.post("/v1/weights", content=body, headers=headers)
            assert ok.status_code == 200 and ok.json()["policy_version"] == 5
            broken = await http.post("/v1/weights", content=b"nope", headers=headers)
            assert broken.status_code == 400
            missing = await http.post("/v1/weights", json={"path": "/nonexistent.safetensors", "version": 6})
            assert missing.status_code == 400 and engine.policy_version == 5
            not_json = await http.post("/v1/weights", content=b"{", headers={"content-type": "application/json"})
            assert not_json.status_code == 400
            bad_version = await http.post("/v1/weights", content=body, headers={**headers, "x-policy-version": "x"})
            assert bad_version.status_code == 400 and engine.policy_version == 5
    finally:
        engine.shutdown()
