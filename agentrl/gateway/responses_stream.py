"""`stream: true` on the Responses API: OpenAI's response events while the policy generates.

`response.created` and `response.in_progress` go out with the first tokens; the reply's text streams as
`response.output_text.delta` events of a message item (held back as the chat stream holds it: what may begin a
tool call waits for the parser); each parsed call follows as a `function_call` item with its arguments; the
stream ends with `response.completed` (or `response.incomplete` when the reply was cut at its token budget), whose
response is the one a non-streamed call returns. A refusal before the first token is an ordinary error answer; a
failure after it is an `error` event that ends the stream.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from agentrl.gateway.errors import REFUSED, refusal
from agentrl.gateway.responses_api import ResponseDraft, function_call_item
from agentrl.gateway.session import GatewaySession
from agentrl.gateway.streaming import NamedEvents, streamed_chat
from agentrl.loops.protocols import TokenGenerator


class ResponseEvents(NamedEvents):
    """The SSE answer of one Responses call (`sequence_number` counted across its events)."""

    def __init__(self, request: web.Request, draft: ResponseDraft) -> None:
        super().__init__(request)
        self.draft = draft
        self.sequence = 0
        self.outputs = 0
        self.text: str | None = None  # the message item's text so far, once it is open

    async def start(self) -> None:
        """Headers, `response.created` and `response.in_progress` (once)."""
        if not await self.open():
            return
        for event in ("response.created", "response.in_progress"):
            await self.send(event, {"response": self.draft.response(None)})

    async def text_delta(self, delta: str) -> None:
        """Text of the reply, in the message item (opened on its first text)."""
        if self.text is None:
            await self._open(self.draft.message_item(None, "in_progress"))
            part = {"type": "output_text", "text": "", "annotations": []}
            await self.send("response.content_part.added", {**self._where(), "part": part})
            self.text = ""
        if delta:
            self.text += delta
            await self.send("response.output_text.delta", {**self._where(), "delta": delta, "logprobs": []})

    async def close_text(self) -> None:
        if self.text is None:
            return
        where, text = self._where(), self.text
        await self.send("response.output_text.done", {**where, "text": text, "logprobs": []})
        part = {"type": "output_text", "text": text, "annotations": []}
        await self.send("response.content_part.done", {**where, "part": part})
        item = self.draft.message_item(text, "completed")
        await self.send("response.output_item.done", {"output_index": self.outputs - 1, "item": item})
        self.text = None

    async def function_call(self, call: dict[str, Any]) -> None:
        """One parsed call as a whole `function_call` item."""
        await self.close_text()
        item = function_call_item(call)
        index = await self._open({**item, "arguments": "", "status": "in_progress"})
        where = {"item_id": item["id"], "output_index": index}
        await self.send("response.function_call_arguments.delta", {**where, "delta": item["arguments"]})
        await self.send("response.function_call_arguments.done", {**where, "arguments": item["arguments"]})
        await self.send("response.output_item.done", {"output_index": index, "item": item})

    async def finish(self, response: dict[str, Any]) -> web.StreamResponse:
        """`response.completed` (or `response.incomplete`) with the whole response."""
        await self.close_text()
        done = "response.incomplete" if response["status"] == "incomplete" else "response.completed"
        await self.send(done, {"response": response})
        return await self.end()

    async def error(self, message: str, code: str | None) -> web.StreamResponse:
        """An `error` event, ending the stream."""
        await self.send("error", {"code": code, "message": message, "param": None})
        return await self.end()

    def stamp(self) -> dict[str, Any]:
        self.sequence += 1
        return {"sequence_number": self.sequence - 1}

    def _where(self) -> dict[str, Any]:
        return {"item_id": self.draft.message_id, "output_index": self.outputs - 1, "content_index": 0}

    async def _open(self, item: dict[str, Any]) -> int:
        index = self.outputs
        self.outputs += 1
        await self.send("response.output_item.added", {"output_index": index, "item": item})
        return index


async def stream_response(
    request: web.Request,
    session: GatewaySession,
    llm: TokenGenerator,
    chat: dict[str, Any],
    draft: ResponseDraft,
    conversation: list[dict[str, Any]],
) -> web.StreamResponse:
    """Answer `chat` (a Responses request with `stream: true`, translated) as response events; the conversation
    (with the reply) is kept for `previous_response_id`."""
    events = ResponseEvents(request, draft)
    try:
        reply, content = await streamed_chat(session, llm, chat, events.text_delta, events.start)
    except REFUSED as exc:
        status, error = refusal(exc)
        if events.response is None:
            return web.json_response(error, status=status)
        return await events.error(error["error"]["message"], error["error"]["code"])
    session.responses.ended[draft.id] = [*conversation, reply.message]
    await events.start()
    calls = reply.message.get("tool_calls") or []
    rest = content.finish(reply.message.get("content") or "")
    if rest or not calls:
        await events.text_delta(rest)
    for call in calls:
        await events.function_call(call)
    return await events.finish(draft.response(reply))
