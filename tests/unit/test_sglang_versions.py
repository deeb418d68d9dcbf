"""SGLang's weight versions come from SGLang only: a reply's `meta_info.weight_version`, streams included; a reply
without one has an unknown version (None), never the client's record of what it pushed last.

The fake SGLang answers as SGLang 0.5.23's http_server.py, tokenizer manager and OpenAI serving do: every `/generate`
answer and stream chunk has `meta_info` with the `weight_version` and `completion_tokens` (the tokens so far); a
stream chunk carries the whole output so far (SGLang's default) or only its new tokens
(`--incremental-streaming-output`). `/v1/completions` puts the version in `metadata` and its stream chunks carry none.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from agentrl.rollout.client import LLMClient, client_api
from agentrl.rollout.errors import ProtocolError
from agentrl.rollout.protocol import SamplingParams
from agentrl.rollout.servers import sglang
from agentrl.rollout.servers.sglang import SGLangServer
from agentrl.rollout.sglang_generate import StreamChunks

FAST: dict[str, Any] = {"backoff_base": 0.01, "backoff_max": 0.05, "health_interval": 0.05}
TOKENS = [7042, 30, 2]
LOGPROBS = [-0.0123, -0.4711, -0.0009]
STOPPED = {"type": "stop", "matched": 2}


def meta_info(version: str | None, start: int, end: int, finished: bool) -> dict[str, Any]:
    """SGLang's `meta_info` after `end` output tokens, with the logprobs of tokens `start..end`."""
    meta: dict[str, Any] = {
        "id": "5c0a4b7e",
        "finish_reason": STOPPED if finished else None,
        "prompt_tokens": 2,
        "completion_tokens": end,
        "cached_tokens": 0,
        "output_token_logprobs": [[lp, t, None] for lp, t in zip(LOGPROBS[start:end], TOKENS[start:end], strict=True)],
    }
    if version is not None:
        meta["weight_version"] = version
    return meta


def generate_answer(version: str | None) -> dict[str, Any]:
    """A whole `/generate` answer."""
    return {"text": " Paris.", "output_ids": list(TOKENS), "meta_info": meta_info(version, 0, len(TOKENS), True)}


def generate_chunks(version: str | None, incremental: bool) -> Iterator[dict[str, Any]]:
    """A `/generate` stream, one token per chunk."""
    for end in range(1, len(TOKENS) + 1):
        start = end - 1 if incremental else 0
        meta = meta_info(version, start, end, end == len(TOKENS))
        yield {"text": None, "output_ids": TOKENS[start:end], "meta_info": meta}


def completion_chunks() -> Iterator[dict[str, Any]]:
    """A `/v1/completions` stream (SGLang's `CompletionStreamResponse`: no `metadata`, so no version)."""
    for i, (token, logprob) in enumerate(zip(TOKENS, LOGPROBS, strict=True)):
        logprobs = {"text_offset": [0], "token_logprobs": [logprob], "tokens": [f"t{token}"], "top_logprobs": [None]}
        finish = "stop" if i == len(TOKENS) - 1 else None
        choice = {"index": 0, "text": f"t{token}", "logprobs": logprobs, "finish_reason": finish, "token_ids": [token]}
        yield {"id": "cmpl-1", "object": "text_completion", "created": 0, "model": "default", "choices": [choice]}


@contextlib.asynccontextmanager
async def fake_sglang(version: str | None, incremental: bool = False) -> AsyncIterator[str]:
    """An SGLang at the yielded base URL that serves weights labelled `version` (None: it reports none)."""

    async def stream(request: web.Request, chunks: Iterator[dict[str, Any]]) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for chunk in chunks:
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        return response

    async def generate(request: web.Request) -> web.StreamResponse:
        if (await request.json()).get("stream"):
            return await stream(request, generate_chunks(version, incremental))
        return web.json_response(generate_answer(version))

    async def completions(request: web.Request) -> web.StreamResponse:
        if (await request.json()).get("stream"):
            return await stream(request, completion_chunks())
        choice = {"index": 0, "text": " Paris.", "finish_reason": "stop", "token_ids": list(TOKENS)}
        choice["logprobs"] = {"token_logprobs": list(LOGPROBS)}
        return web.json_response({"choices": [choice], "metadata": {"weight_version": version}})

    async def health(_: web.Request) -> web.Response:
        return web.Response()

    app = web.Application()
    app.router.add_post("/generate", generate)
    app.router.add_post("/v1/completions", completions)
    app.router.add_get("/health", health)
    async with TestServer(app) as server:
        yield f"http://{server.host}:{server.port}"


async def stream_once(url: str, pushed: int | None = None) -> tuple[Any, list[list[int]]]:
    """One streamed generation from the SGLang at `url` through the client a run uses for `rollout.backend=sglang`;
    `pushed`: the version the client's router last recorded for that replica."""
    chunks: list[list[int]] = []

    async def sink(ids: list[int]) -> None:
        chunks.append(ids)

    async with LLMClient(url, api=client_api("sglang"), **FAST) as llm:
        if pushed is not None:
            llm.router.set_policy_version(url, pushed)
        out = await llm.generate_stream([1, 2], SamplingParams(max_tokens=3), on_tokens=sink)
    return out, chunks


@pytest.mark.parametrize("incremental", [False, True], ids=["whole-output-chunks", "incremental-chunks"])
async def test_a_streamed_reply_takes_its_version_from_sglangs_stream(incremental: bool) -> None:
    async with fake_sglang("5", incremental) as url:
        out, chunks = await stream_once(url)
    assert out.policy_version == 5
    assert (out.token_ids, out.logprobs, out.finish_reason) == (TOKENS, LOGPROBS, "stop")
    assert chunks == [[t] for t in TOKENS]  # each token handed on once, as it arrived


@pytest.mark.parametrize("reported", [None, "default"], ids=["no-weight-version", "default"])
async def test_a_stream_without_a_version_of_ours_is_unknown_not_the_routers_record(reported: str | None) -> None:
    async with fake_sglang(reported) as url:
        out, _ = await stream_once(url, pushed=3)
    assert out.token_ids == TOKENS and out.policy_version is None


async def test_a_whole_reply_takes_its_version_from_sglang_and_none_from_the_router() -> None:
    for reported, expected in (("6", 6), (None, None)):
        async with fake_sglang(reported) as url, LLMClient(url, api=client_api("sglang"), **FAST) as llm:
            llm.router.set_policy_version(url, 3)
            out = await llm.generate([1, 2], SamplingParams(max_tokens=3))
        assert (out.token_ids, out.logprobs, out.policy_version) == (TOKENS, LOGPROBS, expected)


def chunk(ids: list[int] | None, entries: list[int], total: Any, version: str = "2") -> dict[str, Any]:
    """A `/generate` stream chunk whose `output_token_logprobs` hold `entries` (token ids, logprob -1 each)."""
    meta = {"completion_tokens": total, "weight_version": version, "finish_reason": None}
    meta["output_token_logprobs"] = [[-1.0, t, None] for t in entries]
    return {"meta_info": meta} if ids is None else {"output_ids": ids, "meta_info": meta}


def test_stream_chunks_hand_on_each_token_once_in_either_mode() -> None:
    whole, incremental, mixed = StreamChunks(), StreamChunks(), StreamChunks()
    assert whole(chunk([4, 5], [4, 5], 2), "u")["choices"][0]["token_ids"] == [4, 5]
    assert whole(chunk([4, 5, 6], [4, 5, 6], 3), "u")["choices"][0]["token_ids"] == [6]
    assert incremental(chunk([4, 5], [4, 5], 2), "u")["choices"][0]["token_ids"] == [4, 5]
    assert incremental(chunk([4], [4], 3), "u")["choices"][0]["token_ids"] == [4]  # a repeated token is new
    assert incremental(chunk([], [], 3, "7"), "u") == {
        "choices": [{"token_ids": [], "logprobs": {"token_logprobs": []}, "finish_reason": None}],
        "policy_version": 7,
    }
    # new ids with every logprob so far (an aborted incremental stream), and SGLang without output_ids
    assert mixed(chunk([4], [4], 1), "u")["choices"][0]["token_ids"] == [4]
    assert mixed(chunk([9], [4, 9], 2), "u")["choices"][0]["logprobs"]["token_logprobs"] == [-1.0]
    assert mixed(chunk(None, [4, 9, 8], 3), "u")["choices"][0]["token_ids"] == [8]


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (chunk([4], [4], None), "completion_tokens"),
        (chunk([4, 5], [4, 6], 2), "do not hold output tokens 0..2"),
        (chunk([4], [4], 2), "do not hold"),
        ({"output_ids": [4]}, "without meta_info"),
    ],
)
def test_a_stream_chunk_sglang_could_not_have_sent_is_a_protocol_error(bad: dict[str, Any], match: str) -> None:
    with pytest.raises(ProtocolError, match=match):
        StreamChunks()(bad, "http://gpu:30000")


def mock_sglang(monkeypatch: pytest.MonkeyPatch, answer: dict[str, Any]) -> None:
    """`SGLangServer`'s HTTP client answers every request with `answer`."""
    real = httpx.AsyncClient
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json=answer))
    monkeypatch.setattr(sglang.httpx, "AsyncClient", lambda **kw: real(transport=transport, **kw))


@pytest.mark.parametrize("reported", [None, "default"], ids=["no-weight-version", "default"])
async def test_a_reply_without_a_version_of_ours_is_unknown_not_the_clients_record(
    monkeypatch: pytest.MonkeyPatch, reported: str | None
) -> None:
    mock_sglang(monkeypatch, generate_answer(reported))
    server = SGLangServer("http://sglang.test:30000")
    server.policy_version = 4  # what this handle pushed last: not what SGLang says generated the reply
    out = await server.generate([1, 2], SamplingParams(max_tokens=3))
    assert out.token_ids == TOKENS and out.policy_version is None
