"""The simulated server and references of `benchmarks/agent_loop_overhead.py`, and its `--quick` run.

No timed assertions: the server's schedule is checked under a frozen clock, where it is pure arithmetic.
"""

import asyncio
import json
import math

import pytest

from agentrl.rollout.protocol import SamplingParams
from benchmarks.agent_loop_overhead import main
from benchmarks.loop_sim import (
    Params,
    SimulatedServer,
    ideal_bounds,
    latency_table,
    replay_makespan,
    sync_replay_makespan,
    tool_latency,
)
from tests.unit.chatml import chatml_tokenizer

PARAMS = Params(capacity=4, per_token_s=0.00001, prefill_s=0.0002, tokens_per_turn=96, turns=3, tool_median_s=0.001)


def frozen_server(params: Params = PARAMS) -> SimulatedServer:
    return SimulatedServer(chatml_tokenizer(), params, clock=lambda: 0.0)


async def burst(server: SimulatedServer, n: int, max_tokens: int = 1024) -> list:
    for i in range(n):
        server.bind(f"s{i}", i)
    sampling = SamplingParams(max_tokens=max_tokens)
    return await asyncio.gather(*(server.generate([1, 2, 3], sampling, f"s{i}") for i in range(n)))


def test_capacity_is_never_exceeded_and_extra_requests_wait():
    server = frozen_server()
    asyncio.run(burst(server, 18))
    assert server.max_in_flight() == PARAMS.capacity
    service = PARAMS.service_s
    starts = sorted(start for start, _ in server.intervals)
    # 18 requests arriving together on 4 slots: waves of 4 starting every `service` seconds
    assert starts == pytest.approx([(i // PARAMS.capacity) * service for i in range(18)])
    assert max(end for _, end in server.intervals) == pytest.approx(math.ceil(18 / 4) * service)


def test_per_token_latency_accounting():
    server = frozen_server()
    outs = asyncio.run(burst(server, 3))
    assert server.service_time(10) == pytest.approx(PARAMS.prefill_s + 10 * PARAMS.per_token_s)
    for out, (start, end) in zip(outs, server.intervals, strict=True):
        assert len(out.token_ids) == PARAMS.tokens_per_turn and out.finish_reason == "stop"
        assert end - start == pytest.approx(server.service_time(len(out.token_ids)))


def test_max_tokens_cuts_the_reply_and_its_cost():
    server = frozen_server()
    (out,) = asyncio.run(burst(server, 1, max_tokens=10))
    assert len(out.token_ids) == 10 and out.finish_reason == "length"
    start, end = server.intervals[0]
    assert end - start == pytest.approx(server.service_time(10))


def test_scripted_replies_are_tool_calls_then_an_answer():
    server = frozen_server()
    tok = server.tokenizer
    texts = [tok.decode(server.reply_ids(7, k), skip_special_tokens=True) for k in range(PARAMS.turns)]
    assert all('"name": "work"' in t and '"task": 7' in t for t in texts[:-1])
    assert "<tool_call>" not in texts[-1]
    assert all(len(server.reply_ids(7, k)) == PARAMS.tokens_per_turn for k in range(PARAMS.turns))


def test_unbound_session_is_refused():
    server = frozen_server()
    with pytest.raises(KeyError):
        asyncio.run(server.generate([1], SamplingParams(), "nobody"))


def test_tool_latencies_are_seeded_and_long_tailed():
    params = Params(outlier_p=0.5, tool_median_s=0.1)
    assert latency_table(params, 50) == latency_table(params, 50)
    values = [tool_latency(params, i, 0) for i in range(400)]
    assert min(values) < 0.2 < 0.5 < max(values)  # both the lognormal body and the 10x outliers appear


def test_references_bound_each_other():
    params = Params(capacity=8, turns=4)
    latencies = latency_table(params, 100)
    work, critical = ideal_bounds(params, latencies)
    replay = replay_makespan(params, latencies)
    assert replay >= max(work, critical) - 1e-9
    assert work == pytest.approx(100 * 4 * params.service_s / 8)
    waves = math.ceil(100 / 8)
    tools = sum(max(row[k] for row in latencies) for k in range(3))
    assert sync_replay_makespan(params, latencies) == pytest.approx(4 * waves * params.service_s + tools)
    one_turn = Params(capacity=8, turns=1)
    assert replay_makespan(one_turn, [[]] * 20) == pytest.approx(3 * one_turn.service_s)


def test_quick_run_ends_with_the_json_line(capsys):
    result = main(["--quick"])
    last = capsys.readouterr().out.strip().splitlines()[-1]
    parsed = json.loads(last)
    assert parsed == result
    assert {"async_over_sync", "overhead_vs_ideal", "concurrent_trajectories"} <= parsed.keys()
    assert parsed["concurrent_trajectories"] == 32
    assert all(isinstance(parsed[k], float) for k in ("async_over_sync", "overhead_vs_ideal"))
