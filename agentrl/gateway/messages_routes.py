"""The Messages API's routes: `POST /v1/messages` and `POST /v1/messages/count_tokens` of a session, answered
with Anthropic's objects and errors (`{"type": "error", "error": {"type": ..., "message": ...}}`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from agentrl.gateway.errors import REFUSED, refusal
from agentrl.gateway.messages_api import anthropic_error, message_body, message_head, to_chat_request
from agentrl.gateway.messages_stream import stream_messages
from agentrl.gateway.session import GatewaySession
from agentrl.gateway.validation import RequestError, check_message, read_json
from agentrl.loops.protocols import TokenGenerator

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def messages_routes(
    session_of: Callable[[web.Request], GatewaySession | None],
    llm: Callable[[], TokenGenerator],
    model_name: str,
) -> tuple[Handler, Handler]:
    """The handlers of `/messages` and `/messages/count_tokens`."""

    async def messages(request: web.Request) -> web.StreamResponse:
        read = await _session_and_body(request, session_of)
        if isinstance(read, web.Response):
            return read
        session, body = read
        try:
            chat = to_chat_request(body)
        except RequestError as exc:
            return _error(400, str(exc))
        model = str(body.get("model") or model_name)
        if body.get("stream") is True:
            return await stream_messages(request, session, llm(), chat, message_head(model))
        try:
            reply = await session.chat(llm(), chat)
        except REFUSED as exc:
            status, error = refusal(exc)
            return _error(status, error["error"]["message"])
        return web.json_response(message_body(reply, model))

    async def count_tokens(request: web.Request) -> web.StreamResponse:
        read = await _session_and_body(request, session_of)
        if isinstance(read, web.Response):
            return read
        session, body = read
        try:
            chat = to_chat_request({**body, "max_tokens": 1} if isinstance(body, dict) else body)
            for index, message in enumerate(chat["messages"]):
                check_message(message, f"messages[{index}]")
            count = session.recorder.count_tokens(chat["messages"], chat.get("tools"))
        except REFUSED as exc:
            status, error = refusal(exc)
            return _error(status, error["error"]["message"])
        return web.json_response({"input_tokens": count})

    return messages, count_tokens


async def _session_and_body(
    request: web.Request, session_of: Callable[[web.Request], GatewaySession | None]
) -> tuple[GatewaySession, Any] | web.Response:
    """The request's session and JSON body, or the error answer saying why there is none."""
    session = session_of(request)
    if session is None:
        return _error(404, "unknown session: use the base URL your trajectory was given")
    try:
        return session, await read_json(request)
    except RequestError as exc:
        return _error(400, str(exc))


def _error(status: int, message: str) -> web.Response:
    return web.json_response(anthropic_error(status, message), status=status)
