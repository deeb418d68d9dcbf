"""`LLMClient.generate_stream` over real HTTP against a FAKE streaming server: the same tokens as `generate`,
handed on chunk by chunk; failures before the first token retried, a server's 4xx raised with its status."""

from __future__ import annotations

import pytest

from agentrl.rollout import LLMClient, SamplingParams, ServerRequestError
from agentrl.rollout.testing import fake_servers

FAST = {"backoff_base": 0.01, "backoff_max": 0.05, "health_interval": 0.05}
PROMPT = [5, 17, 301, 2]


async def test_a_streamed_generation_is_the_generation_in_chunks() -> None:
    chunks: list[list[int]] = []

    async def sink(ids: list[int]) -> None:
        chunks.append(ids)

    with fake_servers(1, policy_version=4) as (server,):
        async with LLMClient(server.url, **FAST) as llm:
            whole = await llm.generate(PROMPT, SamplingParams(max_tokens=6, seed=1))
            streamed = await llm.generate_stream(PROMPT, SamplingParams(max_tokens=6, seed=1), on_tokens=sink)
    assert server.requests[-1]["stream"] is True and server.requests[-1]["return_token_ids"] is True
    assert len(chunks) == 6 and [t for c in chunks for t in c] == whole.token_ids == streamed.token_ids
    assert streamed.logprobs == whole.logprobs
    assert (streamed.finish_reason, streamed.policy_version) == ("length", 4)


async def test_a_failure_before_the_first_token_is_retried_and_a_4xx_is_raised_with_its_status() -> None:
    async def sink(ids: list[int]) -> None:
        pass

    with fake_servers(1) as (server,):
        async with LLMClient(server.url, **FAST) as llm:
            server.fail_next(1, status=503)
            out = await llm.generate_stream(PROMPT, SamplingParams(max_tokens=3), on_tokens=sink)
            assert len(out.token_ids) == 3 and server.completions == 2
            server.fail_next(1, status=400, message="temperature must be non-negative")
            with pytest.raises(ServerRequestError, match="non-negative") as refused:
                await llm.generate_stream(PROMPT, SamplingParams(max_tokens=3), on_tokens=sink)
    assert refused.value.status_code == 400
