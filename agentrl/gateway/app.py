"""The gateway's HTTP routes (aiohttp, in the event loop of the run's rollout client).

Per session, under `/s/<session>/v1`: `POST /chat/completions` (tools, `tool_choice`, `n=1`, `stream` true or
false), `GET /models`; the bare `/v1/chat/completions` is the session named `default`. With sessions opened on
demand (`agentrl gateway`), `POST /s/<session>/close` ends one and saves its trajectory.

Errors have OpenAI's shape, so SDK clients raise them as usual: 400 for a request the gateway cannot read or a
budget the session hit (`code` names it), 404 for an unknown or closed session, 502 when no rollout server could
answer.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

from aiohttp import web

from agentrl.gateway.messages import MessageError
from agentrl.gateway.recorder import Reply
from agentrl.gateway.session import BudgetExceeded, GatewaySession, SessionClosed
from agentrl.loops.builder import TemplateBoundaryError
from agentrl.loops.protocols import TokenGenerator
from agentrl.rollout.errors import RolloutError

STREAM_PIECE_CHARS = 16
DEFAULT_SESSION = "default"
"""The session of calls to the gateway's bare `/v1` (`agentrl gateway` opens it on demand)."""


def error_response(status: int, message: str, type_: str, code: str | None = None) -> web.Response:
    body = {"error": {"message": message, "type": type_, "param": None, "code": code}}
    return web.json_response(body, status=status)


def build_app(
    sessions: Callable[[str], GatewaySession | None],
    llm: Callable[[], TokenGenerator],
    model_name: str,
    close: Callable[[str], GatewaySession | None] | None = None,
) -> web.Application:
    """The routes, over `sessions` (session id -> session), the rollout client `llm()` and, when given, `close`
    (session id -> the closed session), which adds `POST /s/<session>/close`."""

    async def chat_completions(request: web.Request) -> web.StreamResponse:
        session = sessions(request.match_info.get("session", DEFAULT_SESSION))
        if session is None:
            return error_response(404, "unknown session: use the base URL your trajectory was given", "NotFound")
        try:
            body = await request.json()
        except json.JSONDecodeError as exc:
            return error_response(400, f"the request body is not JSON: {exc}", "BadRequestError")
        try:
            reply = await session.chat(llm(), body)
        except SessionClosed as exc:
            return error_response(404, str(exc), "NotFound", "session_closed")
        except BudgetExceeded as exc:
            return error_response(400, str(exc), "BudgetExceeded", exc.reason.value)
        except (MessageError, TemplateBoundaryError, ValueError) as exc:
            return error_response(400, str(exc), "BadRequestError")
        except RolloutError as exc:
            return error_response(502, f"the rollout server failed: {exc}", "ServerError")
        if body.get("stream"):
            return await _stream(request, reply, model_name, include_usage=_include_usage(body))
        return web.json_response(completion_body(reply, model_name))

    async def models(_: web.Request) -> web.Response:
        return web.json_response(
            {"object": "list", "data": [{"id": model_name, "object": "model", "created": 0, "owned_by": "agentrl"}]}
        )

    async def close_session(request: web.Request) -> web.Response:
        assert close is not None
        session = close(request.match_info["session"])
        if session is None:
            return error_response(404, "unknown session", "NotFound")
        return web.json_response({"id": session.id, "calls": len(session.recorder.calls)})

    app = web.Application(client_max_size=64 * 1024**2)
    app.router.add_post("/s/{session}/v1/chat/completions", chat_completions)
    app.router.add_post("/v1/chat/completions", chat_completions)  # the default session, when one is served
    app.router.add_get("/s/{session}/v1/models", models)
    app.router.add_get("/v1/models", models)
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
        "usage": _usage(reply),
    }


def stream_chunks(reply: Reply, model_name: str, include_usage: bool = False) -> list[dict[str, Any]]:
    """The `chat.completion.chunk` objects of a reply: the role, the content in pieces, the tool calls, the finish
    reason (then the usage when asked): merged, they equal the non-streamed message."""
    head = {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion.chunk", "created": int(time.time())}
    head["model"] = model_name

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}

    message = reply.message
    content = message.get("content") or ""
    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [
        chunk({"content": content[i : i + STREAM_PIECE_CHARS]}) for i in range(0, len(content), STREAM_PIECE_CHARS)
    ]
    for index, call in enumerate(message.get("tool_calls") or []):
        chunks.append(chunk({"tool_calls": [{"index": index, **call}]}))
    chunks.append(chunk({}, reply.finish_reason))
    if include_usage:
        chunks.append({**head, "choices": [], "usage": _usage(reply)})
    return chunks


async def _stream(request: web.Request, reply: Reply, model_name: str, include_usage: bool) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    for chunk in stream_chunks(reply, model_name, include_usage):
        await response.write(f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode())
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


def _include_usage(body: dict[str, Any]) -> bool:
    options = body.get("stream_options") or {}
    return bool(options.get("include_usage"))


def _usage(reply: Reply) -> dict[str, int]:
    total = reply.prompt_tokens + reply.completion_tokens
    return {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens, "total_tokens": total}
