"""`stream: true` on the Messages API: Anthropic's event stream while the policy generates.

`message_start` goes out with the first tokens, then the reply's text as `text_delta` events of content block 0
(held back as the chat stream holds it: what may begin a tool call waits for the parser), then each parsed tool
call as a `tool_use` block whose input arrives as one `input_json_delta`, then `message_delta` (stop reason,
output tokens) and `message_stop`. The events merge into the non-streamed `message` object. A refusal before the
first token is an ordinary error answer; a failure after it is an `error` event that ends the stream.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from agentrl.gateway.errors import REFUSED, refusal
from agentrl.gateway.messages_api import anthropic_error, stop_reason
from agentrl.gateway.recorder import Reply
from agentrl.gateway.session import GatewaySession
from agentrl.gateway.streaming import NamedEvents, StreamedContent, streamed_chat
from agentrl.loops.protocols import TokenGenerator


class EventStream(NamedEvents):
    """The SSE answer of one Messages call: `message_start` on its first event, then content blocks."""

    def __init__(self, request: web.Request, message: dict[str, Any]) -> None:
        super().__init__(request)
        self.message = message
        self.blocks = 0
        self.text_open = False

    async def start(self, input_tokens: int) -> None:
        """Headers and `message_start` (once)."""
        if not await self.open():
            return
        usage = {"input_tokens": input_tokens, "output_tokens": 0}
        await self.send("message_start", {"message": {**self.message, "usage": usage}})

    async def text(self, delta: str) -> None:
        """Text of the reply, in the text block (opened on its first text)."""
        if not self.text_open:
            await self._open({"type": "text", "text": ""})
            self.text_open = True
        if delta:
            await self.send("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": delta}})

    async def tool_use(self, call: dict[str, Any]) -> None:
        """One parsed tool call as a whole `tool_use` block."""
        await self._close_text()
        function = call["function"]
        index = await self._open({"type": "tool_use", "id": call["id"], "name": function["name"], "input": {}})
        delta = {"type": "input_json_delta", "partial_json": function["arguments"]}
        await self.send("content_block_delta", {"index": index, "delta": delta})
        await self.send("content_block_stop", {"index": index})

    async def finish(self, reason: str, sequence: str | None, output_tokens: int) -> web.StreamResponse:
        """`message_delta` and `message_stop`."""
        await self._close_text()
        delta = {"stop_reason": reason, "stop_sequence": sequence}
        await self.send("message_delta", {"delta": delta, "usage": {"output_tokens": output_tokens}})
        await self.send("message_stop", {})
        return await self.end()

    async def error(self, status: int, message: str) -> web.StreamResponse:
        """An `error` event, ending the stream."""
        await self.send("error", {"error": anthropic_error(status, message)["error"]})
        return await self.end()

    async def _open(self, block: dict[str, Any]) -> int:
        index = self.blocks
        self.blocks += 1
        await self.send("content_block_start", {"index": index, "content_block": block})
        return index

    async def _close_text(self) -> None:
        if self.text_open:
            await self.send("content_block_stop", {"index": 0})
            self.text_open = False


async def stream_messages(
    request: web.Request,
    session: GatewaySession,
    llm: TokenGenerator,
    chat: dict[str, Any],
    message: dict[str, Any],
) -> web.StreamResponse:
    """Answer `chat` (a Messages request with `stream: true`, translated) as Anthropic's event stream; `message`:
    the `message` object's fields known before generating (id, model, role)."""
    out = EventStream(request, message)

    async def started() -> None:
        await out.start(session.recorder.calls[-1].prompt_tokens)

    try:
        reply, content = await streamed_chat(session, llm, chat, out.text, started)
    except REFUSED as exc:
        status, error = refusal(exc)
        if out.response is None:
            return web.json_response(anthropic_error(status, error["error"]["message"]), status=status)
        return await out.error(status, error["error"]["message"])
    return await _send_rest(out, content, reply)


async def _send_rest(out: EventStream, content: StreamedContent, reply: Reply) -> web.StreamResponse:
    await out.start(reply.prompt_tokens)
    calls = reply.message.get("tool_calls") or []
    rest = content.finish(reply.message.get("content") or "")
    if rest or not calls:
        await out.text(rest)
    for call in calls:
        await out.tool_use(call)
    reason, sequence = stop_reason(reply)
    return await out.finish(reason, sequence, reply.completion_tokens)
