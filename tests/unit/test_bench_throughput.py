"""The measurement harness of `benchmarks/rollout_throughput.py`, against the FAKE completion server.

No model and no real server; no timed assertions (only token counts, request bodies and the JSON line).
"""

from __future__ import annotations

import asyncio
import json

import pytest

from agentrl.rollout.testing import FakeCompletionServer, fake_token_ids
from benchmarks.rollout_throughput import REQUIRED_KEYS, BackendResult, server, summary, table
from benchmarks.throughput_paths import (
    QUICK,
    Measurement,
    Paths,
    Point,
    Settings,
    make_client,
    make_prompts,
    make_raw_session,
    measure,
    round_order,
)

SETTINGS = Settings(concurrencies=(1, 3), max_tokens=5, rounds=2, waves=2, min_requests=4, prompt_len=6, n_prompts=3)


@pytest.fixture
def fake():
    with FakeCompletionServer() as srv:
        yield srv


async def run_both(url: str, settings: Settings, concurrency: int) -> tuple[Measurement, Measurement]:
    client = make_client(url, settings)
    raw = make_raw_session()
    try:
        async with client:
            paths = Paths(url, settings, client, raw)
            return await paths.run("client", concurrency), await paths.run("raw", concurrency)
    finally:
        await raw.close()


def _key(body: dict) -> str:
    return json.dumps(body, sort_keys=True)


@pytest.mark.parametrize("ignore_eos", [True, False])
def test_client_and_raw_send_identical_bodies(fake, ignore_eos):
    settings = Settings(**{**SETTINGS.__dict__, "ignore_eos": ignore_eos})
    asyncio.run(run_both(fake.url, settings, 3))
    n = settings.requests(3)
    assert fake.completions == 2 * n
    client_bodies, raw_bodies = fake.requests[:n], fake.requests[n:]
    assert sorted(map(_key, client_bodies)) == sorted(map(_key, raw_bodies))
    for body in client_bodies:
        assert body["return_token_ids"] is True and body["logprobs"] == 1
        assert body["temperature"] == 1.0 and body["max_tokens"] == settings.max_tokens
        assert body.get("ignore_eos", False) is ignore_eos
    assert sorted(b["seed"] for b in client_bodies) == list(range(n))  # one seed per request
    prompts = make_prompts(settings.n_prompts, settings.prompt_len, settings.seed)
    assert all(b["prompt"] == prompts[b["seed"] % len(prompts)] for b in raw_bodies)


def test_both_paths_count_tokens_identically(fake):
    client, raw = asyncio.run(run_both(fake.url, SETTINGS, 3))
    n = SETTINGS.requests(3)
    for m in (client, raw):
        assert (m.requests, m.tokens, m.short) == (n, n * SETTINGS.max_tokens, 0)
        assert m.concurrency == 3 and m.wall_s > 0 and m.tok_s > 0
    assert (client.path, raw.path) == ("client", "raw")
    assert fake.max_in_flight <= 3


def test_tokens_are_counted_not_assumed(fake):
    # the fake server stops at a stop token id: count what came back, flag the short requests
    settings = SETTINGS
    prompts = make_prompts(settings.n_prompts, settings.prompt_len, settings.seed)
    stop = fake_token_ids(prompts[0], settings.max_tokens, settings.seed)[1]  # second token of request 0

    async def go() -> tuple[Measurement, Measurement]:
        client = make_client(fake.url, settings)
        raw = make_raw_session()
        try:
            async with client:
                paths = Paths(fake.url, settings, client, raw)
                out = []
                for path in ("client", "raw"):
                    out.append(await measure(path, 1, 1, settings.max_tokens, paths.sender(path)))
                return out[0], out[1]
        finally:
            await raw.close()

    fake_generate = fake._generate

    def with_stop(prompt, max_tokens, body):
        return fake_generate(prompt, max_tokens, {**body, "stop_token_ids": [stop]})

    fake._generate = with_stop
    client, raw = asyncio.run(go())
    assert client.tokens == raw.tokens == 2
    assert client.short == raw.short == 1


def test_round_order_interleaves():
    assert round_order(1) == ["client", "raw"]
    assert round_order(2) == ["client", "raw", "raw", "client"]
    assert round_order(3).count("client") == 3


def _m(path: str, c: int, tokens: int, wall: float) -> Measurement:
    return Measurement(path, c, 8, tokens, wall, 0.01, 0)


def test_summary_keeps_the_best_round_and_required_keys():
    p1, p32 = Point(1), Point(32)
    p1.rounds = {"client": [_m("client", 1, 100, 10), _m("client", 1, 100, 5)], "raw": [_m("raw", 1, 100, 4)]}
    p32.rounds = {"client": [_m("client", 32, 1000, 5)], "raw": [_m("raw", 32, 1000, 4), _m("raw", 32, 900, 9)]}
    figures = summary([BackendResult("hf", "http://x", [p1, p32])])
    assert set(REQUIRED_KEYS) <= figures.keys()
    assert figures["vllm_tok_s_c32"] is None and figures["client_over_raw_vllm_c32"] is None
    assert figures["hf_tok_s_c1"] == 20.0 and figures["hf_raw_tok_s_c1"] == 25.0
    assert figures["hf_tok_s_c32"] == 200.0 and figures["client_over_raw_hf_c32"] == 0.8
    assert figures["hf_scaling_c32_over_c1"] == 10.0
    assert "hf" in table([BackendResult("hf", "http://x", [p1, p32])], SETTINGS)


def test_given_url_starts_no_server():
    with server("vllm", "http://127.0.0.1:1/", SETTINGS, print) as url:
        assert url == "http://127.0.0.1:1"


def test_quick_run_ends_with_the_json_line(fake, capsys):
    from benchmarks.rollout_throughput import main

    result = main(["--quick", "--url-hf", fake.url], log=lambda _: None)
    last = capsys.readouterr().out.strip().splitlines()[-1]
    parsed = json.loads(last)
    assert parsed == result
    assert set(REQUIRED_KEYS) <= parsed.keys()
    assert parsed["vllm_tok_s_c32"] is None
    assert parsed["hf_tok_s_c1"] > 0 and parsed["hf_raw_tok_s_c4"] > 0
    assert parsed["hf_short_requests"] == 0
    assert isinstance(parsed["hf_scaling_c4_over_c1"], float)
    per_request = QUICK.max_tokens
    assert fake.completions == 2 * sum(QUICK.requests(c) * QUICK.rounds for c in QUICK.concurrencies) + 2 * len(
        make_prompts(QUICK.n_prompts, QUICK.prompt_len)
    )
    assert all(b["max_tokens"] in (per_request, 2) and b["ignore_eos"] is True for b in fake.requests)
