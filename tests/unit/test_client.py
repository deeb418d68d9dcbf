"""LLMClient tests over real HTTP against FAKE servers on localhost."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import pytest

from agentrl.rollout import (
    LLMClient,
    ProtocolError,
    Router,
    SamplingParams,
    ServerRequestError,
    ServerUnavailableError,
    TokenOutput,
)
from agentrl.rollout.completions import completion_body, reported_version
from agentrl.rollout.errors import error_message
from agentrl.rollout.testing import fake_logprobs, fake_servers, fake_token_ids

FAST: dict[str, Any] = {"backoff_base": 0.01, "backoff_max": 0.05, "health_interval": 0.05}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_token_ids_and_logprobs_parsed_exactly() -> None:
    prompt = [5, 17, 301, 2]
    with fake_servers(1) as (server,):
        async with LLMClient(server.url + "/v1", **FAST) as llm:
            out = await llm.generate(prompt, SamplingParams(max_tokens=7, seed=3))
    expected = fake_token_ids(prompt, 7, seed=3)
    assert out == TokenOutput(
        token_ids=expected,
        logprobs=fake_logprobs(expected),
        finish_reason="length",
        policy_version=None,
        prompt_token_ids=prompt,
        replica=server.url,
    )


async def test_request_body_carries_sampling_and_token_flags() -> None:
    sampling = SamplingParams(temperature=0.7, top_p=0.9, top_k=20, max_tokens=5, stop=["\n"], seed=11)
    with fake_servers(1) as (server,):
        async with LLMClient([server.url], model="m", **FAST) as llm:
            await llm.generate([1, 2, 3], sampling)
    body = server.requests[0]
    assert body == completion_body([1, 2, 3], sampling, "m")
    assert body["prompt"] == [1, 2, 3] and body["seed"] == 11 and body["model"] == "m"
    assert body["return_token_ids"] is True and body["logprobs"] == 1
    assert (body["temperature"], body["top_p"], body["top_k"], body["stop"]) == (0.7, 0.9, 20, ["\n"])
    assert "stop_token_ids" not in completion_body([1], SamplingParams())


async def test_stop_token_ids_finish_with_stop() -> None:
    stop_at = fake_token_ids([9], 10)[3]
    with fake_servers(1) as (server,):
        async with LLMClient(server.url, **FAST) as llm:
            out = await llm.generate([9], SamplingParams(max_tokens=10, stop_token_ids=[stop_at]))
    assert out.token_ids == fake_token_ids([9], 10)[:4]
    assert out.finish_reason == "stop"


async def test_policy_version_from_response_wins() -> None:
    with fake_servers(1, policy_version=7) as (server,):
        async with LLMClient(server.url, **FAST) as llm:
            llm.router.set_policy_version(server.url, 3)
            assert (await llm.generate([1], SamplingParams(max_tokens=1))).policy_version == 7


async def test_policy_version_is_never_guessed_from_the_client_side() -> None:
    with fake_servers(1) as (server,):
        async with LLMClient(server.url, **FAST) as llm:
            llm.router.set_policy_version(server.url, 3)  # what the driver last pushed is not what generated a reply
            assert (await llm.generate([1], SamplingParams(max_tokens=1))).policy_version is None


def test_reported_version_reads_each_backend_s_field() -> None:
    assert reported_version({"policy_version": 4}) == 4  # the hf server
    assert reported_version({"metadata": {"weight_version": "5"}}) == 5  # SGLang's OpenAI routes
    assert reported_version({"metadata": {"weight_version": "default"}}) is None  # SGLang before any update
    assert reported_version({"choices": []}) is None


async def test_missing_token_ids_is_a_clear_error() -> None:
    with fake_servers(1, return_token_ids=False) as (server,):
        async with LLMClient(server.url, **FAST) as llm:
            with pytest.raises(ProtocolError, match=r"return_token_ids.*vLLM >= 0\.10\.2") as info:
                await llm.generate([1], SamplingParams(max_tokens=2))
    assert server.url in str(info.value)


async def test_4xx_not_retried_and_message_surfaced() -> None:
    with fake_servers(2, max_model_len=16) as servers:
        async with LLMClient([s.url for s in servers], **FAST) as llm:
            with pytest.raises(ServerRequestError, match="maximum context length is 16") as info:
                await llm.generate(list(range(10)), SamplingParams(max_tokens=10))
    assert info.value.status_code == 400
    assert sum(s.completions for s in servers) == 1


async def test_503_retried_with_backoff_then_succeeds() -> None:
    with fake_servers(1) as (server,):
        server.fail_next(2, status=503)
        async with LLMClient(server.url, **FAST) as llm:
            out = await llm.generate([4], SamplingParams(max_tokens=2))
    assert out.token_ids == fake_token_ids([4], 2)
    assert server.completions == 3


async def test_persistent_5xx_raises_server_request_error() -> None:
    with fake_servers(1) as (server,):
        server.fail_next(100, status=500, message="engine crashed")
        async with LLMClient(server.url, max_retries=2, **FAST) as llm:
            with pytest.raises(ServerRequestError, match=r"engine crashed.*after 2 retries") as info:
                await llm.generate([4], SamplingParams(max_tokens=2))
    assert info.value.status_code == 500
    assert server.completions == 3


async def test_5xx_retry_prefers_another_replica() -> None:
    with fake_servers(2) as servers:
        servers[0].fail_next(1, status=502)
        servers[1].fail_next(1, status=502)
        async with LLMClient([s.url for s in servers], **FAST) as llm:
            out = await llm.generate([1], SamplingParams(max_tokens=1), session_id="s")
    assert out.token_ids == fake_token_ids([1], 1)
    assert [s.completions for s in servers] in ([2, 1], [1, 2])


async def test_all_replicas_down_raises_helpful_error() -> None:
    urls = [f"http://127.0.0.1:{free_port()}" for _ in range(2)]
    async with LLMClient(urls, max_retries=3, **FAST) as llm:
        with pytest.raises(ServerUnavailableError) as info:
            await llm.generate([1], SamplingParams(max_tokens=1))
    message = str(info.value)
    assert f"no rollout server answered at {urls}" in message
    assert "is it running? start one with `agentrl serve`" in message
    assert llm.router.dead == urls


async def test_server_back_before_retries_end_is_used() -> None:
    with fake_servers(1) as (server,):
        server.kill()
        async with LLMClient(server.url, max_retries=40, backoff_base=0.05, backoff_max=0.05) as llm:
            task = asyncio.create_task(llm.generate([2], SamplingParams(max_tokens=1)))
            await asyncio.sleep(0.3)
            assert not task.done() and llm.router.dead == [server.url]
            server.restart()
            out = await task
    assert out.token_ids == fake_token_ids([2], 1)


async def test_chat_convenience() -> None:
    with fake_servers(1) as (server,):
        async with LLMClient(server.url, model="m", **FAST) as llm:
            reply = await llm.chat([{"role": "user", "content": "hi"}], temperature=0.0, max_tokens=8)
    assert reply == "fake reply to: hi"
    assert server.requests[0] == {
        "messages": [{"role": "user", "content": "hi"}],
        "temperature": 0.0,
        "max_tokens": 8,
        "model": "m",
    }


async def test_shared_router_is_not_stopped_by_client() -> None:
    with fake_servers(1) as (server,):
        router = Router([server.url], health_interval=0.05)
        llm = LLMClient(router, **FAST)
        assert router.probe is not None
        await llm.generate([1], SamplingParams(max_tokens=1))
        await llm.aclose()
        assert router._task is not None and not router._task.done()
        await router.stop()


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        ({"error": {"message": "too long", "code": 400}}, "too long"),
        ({"object": "error", "message": "vllm says no", "code": 400}, "vllm says no"),
        ({"detail": "fastapi says no"}, "fastapi says no"),
    ],
)
def test_error_message_shapes(payload: dict[str, object], expected: str) -> None:
    assert error_message(json.dumps(payload)) == expected
    assert error_message("plain failure") == "plain failure"
    assert error_message("", "Bad Request") == "Bad Request"
