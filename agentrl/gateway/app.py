"""The gateway's HTTP routes (aiohttp, in the event loop of the run's rollout client).

Per session, under `/s/<session>/v1`: `POST /chat/completions` (tools, `tool_choice` auto or none, `n=1`, `stream`
true or false; `agentrl.gateway.request_fields` lists every field), Anthropic's `POST /messages` and
`POST /messages/count_tokens` (`agentrl.gateway.messages_api`), OpenAI's `POST /responses`
(`agentrl.gateway.responses_api`), `GET /models`; the bare `/v1/...` routes are the
session named `default`. With sessions opened on demand (`agentrl gateway`), `POST /s/<session>/close` ends
one and saves its trajectory. Errors are OpenAI-shaped (see `agentrl.gateway.errors`); `stream: true` answers
server-sent events as the tokens are generated (see `agentrl.gateway.streaming`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from aiohttp import web

from agentrl.gateway.auth import token_guard
from agentrl.gateway.errors import REFUSED, error_response, refusal
from agentrl.gateway.messages_api import model_entry
from agentrl.gateway.messages_routes import messages_routes
from agentrl.gateway.recorder import Reply
from agentrl.gateway.responses_routes import responses_route
from agentrl.gateway.session import GatewaySession
from agentrl.gateway.streaming import stream_chat
from agentrl.gateway.validation import RequestError, read_json
from agentrl.loops.protocols import TokenGenerator

DEFAULT_SESSION = "default"
"""The session of calls to the gateway's bare `/v1` (`agentrl gateway` opens it on demand)."""


def build_app(
    sessions: Callable[[str], GatewaySession | None],
    llm: Callable[[], TokenGenerator],
    model_name: str,
    close: Callable[[str], GatewaySession | None] | None = None,
    token: str | None = None,
) -> web.Application:
    """The routes, over `sessions` (session id -> session), the rollout client `llm()` and, when given, `close`
    (session id -> the closed session), which adds `POST /s/<session>/close`; with `token`, every route needs it
    as the API key (`agentrl.gateway.auth`)."""

    def session_of(request: web.Request) -> GatewaySession | None:
        return sessions(request.match_info.get("session", DEFAULT_SESSION))

    async def chat_completions(request: web.Request) -> web.StreamResponse:
        session = session_of(request)
        if session is None:
            return error_response(404, "unknown session: use the base URL your trajectory was given", "NotFound")
        try:
            body = await read_json(request)
        except RequestError as exc:
            return error_response(400, str(exc), "BadRequestError")
        if isinstance(body, dict) and body.get("stream") is True:
            return await stream_chat(request, session, llm(), body, model_name)
        try:
            reply = await session.chat(llm(), body)
        except REFUSED as exc:
            status, error = refusal(exc)
            return web.json_response(error, status=status)
        return web.json_response(completion_body(reply, model_name))

    async def models(_: web.Request) -> web.Response:
        names = list(dict.fromkeys([model_name, *getattr(llm(), "names", [])]))  # with several policies, each's
        data = [model_entry(name) for name in names]  # OpenAI's and Anthropic's listing in one
        return web.json_response({"object": "list", "data": data, "has_more": False, "first_id": names[0],
                                  "last_id": names[-1]})  # fmt: skip

    messages, count_tokens = messages_routes(session_of, llm, model_name)
    responses = responses_route(session_of, llm, model_name)

    async def close_session(request: web.Request) -> web.Response:
        assert close is not None
        session = close(request.match_info["session"])
        if session is None:
            return error_response(404, "unknown session", "NotFound")
        return web.json_response({"id": session.id, "calls": len(session.recorder.calls)})

    guards = [token_guard(token)] if token is not None else []
    app = web.Application(client_max_size=64 * 1024**2, middlewares=guards)
    app.router.add_post("/s/{session}/v1/chat/completions", chat_completions)
    app.router.add_post("/v1/chat/completions", chat_completions)  # the default session, when one is served
    app.router.add_get("/s/{session}/v1/models", models)
    app.router.add_get("/v1/models", models)
    for prefix in ("/s/{session}/v1", "/v1"):  # Anthropic's Messages API (Claude Code, the anthropic SDK)
        app.router.add_post(f"{prefix}/messages", messages)
        app.router.add_post(f"{prefix}/messages/count_tokens", count_tokens)
        app.router.add_post(f"{prefix}/responses", responses)  # OpenAI's Responses API (Codex CLI)
    if close is not None:
        app.router.add_post("/s/{session}/close", close_session)
    return app


def completion_body(reply: Reply, model_name: str) -> dict[str, Any]:
    """A `chat.completion` object."""
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model_name,
        "choices": [{"index": 0, "message": reply.message, "finish_reason": reply.finish_reason, "logprobs": None}],
        "usage": reply.usage(),
    }
