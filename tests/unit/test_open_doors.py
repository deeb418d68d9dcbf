"""No server agentrl starts takes weights, worker calls or sessions from beyond loopback without a token: each
refusal, and each token check, without a real server (the probes from another network namespace are in
tests/integration/test_open_doors_real.py)."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from agentrl.errors import UserError
from agentrl.gateway import Gateway
from agentrl.loops.testing import ScriptedPolicy
from agentrl.rollout.servers import sglang, vllm
from agentrl.rollout.servers.process import ManagedServer, ServerProcess
from agentrl.vllm_gate import WeightsTokenGate
from agentrl.weights_token import WEIGHTS_TOKEN_ENV, MissingTokenError

TOKEN = "s3cret-token"


@pytest.fixture(autouse=True)
def no_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(WEIGHTS_TOKEN_ENV, raising=False)
    monkeypatch.delenv("AGENTRL_GATEWAY_TOKEN", raising=False)


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """What `launch` would start: the command, environment and token of each server (nothing is run)."""
    starts: list[dict[str, Any]] = []

    def start_process(cls, cmd, *, host, port, model_path, env, log_path, name, startup_timeout, token=None):
        starts.append({"cmd": cmd, "env": env, "token": token})
        return cls(f"http://{host}:{port}", model_path=model_path, token=token)

    monkeypatch.setattr(ManagedServer, "start_process", classmethod(start_process))
    monkeypatch.setattr("agentrl.models.resolve_model", lambda spec: "/models/m")
    monkeypatch.setattr(vllm, "vllm_python", lambda explicit=None: "/venv/bin/python")
    monkeypatch.setattr(vllm.VLLMServer, "label_version", lambda self, version: None)
    return starts


@pytest.mark.parametrize("launch", [vllm.VLLMServer.launch, sglang.SGLangServer.launch], ids=["vllm", "sglang"])
def test_a_server_beyond_loopback_without_a_token_is_refused_before_it_starts(launch, started):
    with pytest.raises(MissingTokenError, match=f"host 0.0.0.0 .*set {WEIGHTS_TOKEN_ENV}.*or serve on 127.0.0.1"):
        launch("default", host="0.0.0.0", port=8000)
    assert started == []
    launch("default", host="127.0.0.1", port=8000)  # loopback: as before, no token
    assert "--middleware" not in started[0]["cmd"] and "--admin-api-key" not in started[0]["cmd"]


def test_vllm_with_a_token_starts_behind_agentrls_gate_and_its_handle_keeps_the_token(started, monkeypatch):
    server = vllm.VLLMServer.launch("default", host="0.0.0.0", port=8000, token=TOKEN)
    cmd, env = started[0]["cmd"], started[0]["env"]
    assert cmd[cmd.index("--middleware") + 1] == "agentrl.vllm_gate.WeightsTokenGate"
    assert TOKEN not in cmd and env[WEIGHTS_TOKEN_ENV] == TOKEN  # the gate reads it from its environment
    assert server.token == TOKEN and server.auth_headers() == {"authorization": f"Bearer {TOKEN}"}
    monkeypatch.setenv(WEIGHTS_TOKEN_ENV, "from-env")  # the environment's token serves as well
    assert vllm.VLLMServer.launch("default", host="10.0.0.5", port=8001).token == "from-env"


def test_sglang_with_a_token_guards_its_admin_routes_and_never_shows_the_token(started):
    server = sglang.SGLangServer.launch("default", host="0.0.0.0", port=8000, token=TOKEN)
    cmd = started[0]["cmd"]
    assert cmd[cmd.index("--admin-api-key") + 1] == TOKEN and "--api-key" not in cmd  # /generate stays open
    assert server.token == TOKEN
    shown = ServerProcess(cmd, secrets=[TOKEN]).shown_cmd()
    assert TOKEN not in shown and "--admin-api-key ***" in shown
    with pytest.raises(UserError, match="one tokenizer worker"):  # SGLang applies no key with several
        sglang.SGLangServer.launch("default", host="0.0.0.0", token=TOKEN, extra_args=["--tokenizer-worker-num=2"])


@pytest.mark.parametrize("backend", ["vllm", "sglang"])
def test_a_handle_sends_its_token_on_every_control_call(backend, monkeypatch):
    seen: list[tuple[str, str | None]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.url.path, request.headers.get("authorization")))
        body = {"weight_version": "0", "success": True} if backend == "sglang" else {"weight_version": "0"}
        return httpx.Response(200, json=body)

    real = httpx.Client
    monkeypatch.setattr(httpx, "Client", lambda **kw: real(transport=httpx.MockTransport(handler), **kw))
    cls = vllm.VLLMServer if backend == "vllm" else sglang.SGLangServer
    server = cls("http://10.0.0.5:8000", token=TOKEN)
    server.pause()
    server.resume()
    server.served_version()
    assert len(seen) == 3 and all(auth == f"Bearer {TOKEN}" for _, auth in seen)


async def _gate_answers(path: str, headers: dict[str, str] | None = None) -> int:
    async def app(scope, receive, send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    transport = httpx.ASGITransport(app=WeightsTokenGate(app))
    async with httpx.AsyncClient(transport=transport, base_url="http://vllm") as http:
        return (await http.post(path, json={}, headers=headers or {})).status_code


async def test_vllms_gate_refuses_every_route_but_generation_and_health_without_the_token(monkeypatch):
    monkeypatch.setenv(WEIGHTS_TOKEN_ENV, TOKEN)
    for path in ("/collective_rpc", "/pause", "/update_weight_version", "/v1/load_lora_adapter", "/sleep"):
        assert await _gate_answers(path) == 401, path
        assert await _gate_answers(path, {"Authorization": "Bearer wrong"}) == 401, path
        assert await _gate_answers(path, {"Authorization": f"Bearer {TOKEN}"}) == 200, path
    for path in ("/v1/completions", "/v1/chat/completions", "/inference/v1/generate", "/health", "/openapi.json"):
        assert await _gate_answers(path) == 200, path


def test_vllms_gate_without_a_token_in_its_environment_stops_vllm_from_starting():
    with pytest.raises(RuntimeError, match=WEIGHTS_TOKEN_ENV):
        WeightsTokenGate(lambda scope, receive, send: None)  # type: ignore[arg-type, return-value]


def test_the_gateway_serving_sessions_on_demand_beyond_loopback_needs_a_token(tokenizer):
    from agentrl.gateway.serve import parse_gateway_overrides

    with pytest.raises(UserError, match="AGENTRL_GATEWAY_TOKEN.*API key"):
        parse_gateway_overrides(["gateway.host=0.0.0.0"])
    with pytest.raises(UserError, match="AGENTRL_GATEWAY_TOKEN"):
        Gateway(ScriptedPolicy(tokenizer, []), tokenizer, host="0.0.0.0", on_demand=True)
    assert parse_gateway_overrides(["gateway.host=127.0.0.1"])[0].token is None  # loopback: as before
    assert Gateway(ScriptedPolicy(tokenizer, []), tokenizer, host="0.0.0.0").token is None  # sessions it hands out


async def test_the_gateways_token_is_the_agents_api_key_as_bearer_or_x_api_key(tokenizer):
    policy = ScriptedPolicy(tokenizer, ["one", "two"])
    async with Gateway(policy, tokenizer, on_demand=True, token=TOKEN) as gateway:
        async with httpx.AsyncClient(base_url=gateway.url) as http:
            assert (await http.post("/s/a/close")).status_code == 401
            assert (await http.get("/v1/models", headers={"x-api-key": "wrong"})).status_code == 401
            assert (await http.get("/v1/models", headers={"x-api-key": TOKEN})).status_code == 200
        assert gateway.sessions == {}  # nothing opened by the refused calls
        with pytest.raises(openai.AuthenticationError):
            await openai.AsyncOpenAI(base_url=f"{gateway.url}/s/a/v1", api_key="wrong", max_retries=0).models.list()
        sdk = openai.AsyncOpenAI(base_url=f"{gateway.url}/s/a/v1", api_key=TOKEN, max_retries=0)  # Bearer
        reply = await sdk.chat.completions.create(model="p", messages=[{"role": "user", "content": "hi"}])
        assert reply.choices[0].message.content == "one" and list(gateway.sessions) == ["a"]


def test_a_harness_refuses_a_sandbox_with_network_at_start():
    from agentrl.config import load_config
    from agentrl.loops.preflight import agent_problems

    assert not [p for p in agent_problems(load_config("claude_code")) if "sandbox.network" in p]
    problems = agent_problems(load_config("claude_code", ["sandbox.network=true"]))
    assert [p for p in problems if "agent.kwargs.harness=claude_code" in p and "sandbox.network=true" in p]
