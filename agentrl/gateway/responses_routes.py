"""The Responses API's route: `POST /v1/responses` of a session, answered with OpenAI's `response` object (or its
event stream) and OpenAI-shaped errors."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from agentrl.gateway.errors import REFUSED, error_response, refusal
from agentrl.gateway.responses_api import ResponseDraft, to_chat_request
from agentrl.gateway.responses_stream import stream_response
from agentrl.gateway.session import GatewaySession
from agentrl.gateway.validation import RequestError, read_json
from agentrl.loops.protocols import TokenGenerator


def responses_route(
    session_of: Callable[[web.Request], GatewaySession | None],
    llm: Callable[[], TokenGenerator],
    model_name: str,
) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """The handler of `/responses`."""

    async def responses(request: web.Request) -> web.StreamResponse:
        session = session_of(request)
        if session is None:
            return error_response(404, "unknown session: use the base URL your trajectory was given", "NotFound")
        try:
            body = await read_json(request)
            chat, conversation = to_chat_request(body, session.responses)
        except RequestError as exc:
            return error_response(400, str(exc), "invalid_request_error", param=exc.param or None)
        draft = ResponseDraft(body, str(body.get("model") or model_name))
        if body.get("stream") is True:
            return await stream_response(request, session, llm(), chat, draft, conversation)
        try:
            reply = await session.chat(llm(), chat)
        except REFUSED as exc:
            status, error = refusal(exc)
            return web.json_response(error, status=status)
        session.responses.ended[draft.id] = [*conversation, reply.message]
        return web.json_response(draft.response(reply))

    return responses
