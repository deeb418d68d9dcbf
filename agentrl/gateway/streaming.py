"""`stream: true`: a chat call answered as `chat.completion.chunk` server-sent events while the policy generates.

The content goes out as the rollout server's tokens arrive. When the reply is parsed for tool calls, only the text
the parser says cannot be the start of a call is sent early (`ToolCallParser.content_length`); the rest, and the
tool calls, follow once the reply is recorded and parsed, so the chunks merge into the non-streamed message (up
to whitespace around the content, which the gateway ignores when the agent sends the message back). A refusal
before the first token is an ordinary error answer; a failure after it is an `error` event that ends the stream.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from agentrl.gateway.errors import REFUSED, refusal
from agentrl.gateway.recorder import Reply, before_stop
from agentrl.gateway.session import GatewaySession, parses_tool_calls
from agentrl.loops.protocols import TokenGenerator, Tokenizer
from agentrl.tools.parsers import ToolCallParser

SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}


class StreamedContent:
    """The content of a reply still being generated, in pieces that never need taking back.

    The newest token's text is held back (it may be the end-of-turn token, or half a character), and so is what
    `parser` says may begin a tool call, and trailing whitespace (which the parsed content loses), and whatever
    may be the start of one of the `stop` sequences (the reply's text ends before the one that ends it).
    """

    def __init__(self, tokenizer: Tokenizer, parser: ToolCallParser | None, stop: list[str] | None = None) -> None:
        self.tokenizer, self.parser = tokenizer, parser
        self.stop = [sequence for sequence in stop or [] if sequence]
        self.ids: list[int] = []
        self.sent = ""

    def push(self, ids: list[int]) -> str:
        """The content that `ids` settle (O(length) per call: the text so far is decoded again)."""
        self.ids += ids
        text = self.tokenizer.decode(self.ids[:-1], skip_special_tokens=False).rstrip("\ufffd")
        if self.stop:
            text = _short_of_stop(text, self.stop)
        if self.parser is not None:
            text = text[: self.parser.content_length(text)].rstrip()
        return self._send(text) if text.startswith(self.sent) else ""

    def finish(self, content: str) -> str:
        """What is left of the reply's final content."""
        for sent in (self.sent, self.sent.lstrip()):  # the parsed content loses leading whitespace too
            if content.startswith(sent):
                self.sent = sent
                return self._send(content)
        return ""

    def _send(self, text: str) -> str:
        delta, self.sent = text[len(self.sent) :], text
        return delta


def _short_of_stop(text: str, stop: list[str]) -> str:
    """`text` before the first of the `stop` sequences it holds, less an end that may begin one of them."""
    text, _ = before_stop(text, stop)
    held = [size for sequence in stop for size in range(1, len(sequence)) if text.endswith(sequence[:size])]
    return text[: len(text) - max(held, default=0)]


class NamedEvents:
    """An SSE answer of named events (`event: <type>` then its JSON), started by `open` with the headers: the
    shape both the Messages and the Responses streams take."""

    def __init__(self, request: web.Request) -> None:
        self.request = request
        self.response: web.StreamResponse | None = None

    async def open(self) -> bool:
        """Send the headers; False when they were sent already."""
        if self.response is not None:
            return False
        self.response = web.StreamResponse(headers=SSE_HEADERS)
        await self.response.prepare(self.request)
        return True

    async def send(self, event: str, data: dict[str, Any]) -> None:
        """One event, its `type` the event's name."""
        assert self.response is not None
        payload = json.dumps({"type": event, **self.stamp(), **data}, ensure_ascii=False)
        await self.response.write(f"event: {event}\ndata: {payload}\n\n".encode())

    def stamp(self) -> dict[str, Any]:
        """Fields every event carries besides its type (none by default)."""
        return {}

    async def end(self) -> web.StreamResponse:
        """End the stream."""
        assert self.response is not None
        await self.response.write_eof()
        return self.response


async def streamed_chat(
    session: GatewaySession,
    llm: TokenGenerator,
    body: dict[str, Any],
    on_delta: Callable[[str], Awaitable[None]],
    on_tokens: Callable[[], Awaitable[None]] | None = None,
) -> tuple[Reply, StreamedContent]:
    """`session.chat(llm, body)` with the content handed to `on_delta` as it settles (`on_tokens` called first,
    on every tokens the server sends); returns the reply and the content stream (for what is left of it).

    Raises:
        the `REFUSED` errors of `GatewaySession.chat`.
    """
    parser = session.recorder.parser if parses_tool_calls(body) else None
    content = StreamedContent(session.recorder.tokenizer, parser, session.stop_sequences(body))

    async def pushed(ids: list[int]) -> None:
        if on_tokens is not None:
            await on_tokens()
        if delta := content.push(ids):
            await on_delta(delta)

    return await session.chat(llm, body, pushed), content


class ChunkStream:
    """The SSE answer of one call, started (headers, then the role chunk) by its first `send`."""

    def __init__(self, request: web.Request, model_name: str) -> None:
        self.request = request
        self.head: dict[str, Any] = {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion.chunk"}
        self.head.update({"created": int(time.time()), "model": model_name})
        self.response: web.StreamResponse | None = None

    async def send(self, delta: dict[str, Any], finish: str | None = None) -> None:
        """One chunk with `delta` (and the finish reason of the last one)."""
        if self.response is None:
            self.response = web.StreamResponse(
                headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
            )
            await self.response.prepare(self.request)
            await self._write(self._chunk({"role": "assistant", "content": ""}))
        await self._write(self._chunk(delta, finish))

    async def end(self, usage: dict[str, int] | None = None, error: dict[str, Any] | None = None) -> web.StreamResponse:
        """The usage chunk (when asked) or an error event, then `[DONE]`."""
        assert self.response is not None
        if usage is not None:
            await self._write({**self.head, "choices": [], "usage": usage})
        if error is not None:
            await self._write(error)
        await self.response.write(b"data: [DONE]\n\n")
        await self.response.write_eof()
        return self.response

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**self.head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}

    async def _write(self, data: dict[str, Any]) -> None:
        assert self.response is not None
        await self.response.write(f"data: {json.dumps(data, ensure_ascii=False)}\n\n".encode())


async def stream_chat(
    request: web.Request, session: GatewaySession, llm: TokenGenerator, body: dict[str, Any], model_name: str
) -> web.StreamResponse:
    """Answer `body` (a `stream: true` request) as server-sent events while the reply is generated."""
    out = ChunkStream(request, model_name)

    async def on_delta(delta: str) -> None:
        await out.send({"content": delta})

    try:
        reply, content = await streamed_chat(session, llm, body, on_delta)
    except REFUSED as exc:
        status, error = refusal(exc)
        if out.response is None:
            return web.json_response(error, status=status)
        return await out.end(error=error)
    await _send_rest(out, content, reply)
    options = body.get("stream_options") or {}
    return await out.end(usage=reply.usage() if options.get("include_usage") else None)


async def _send_rest(out: ChunkStream, content: StreamedContent, reply: Reply) -> None:
    """The content not streamed yet, the tool calls, and the finish reason."""
    if rest := content.finish(reply.message.get("content") or ""):
        await out.send({"content": rest})
    for index, call in enumerate(reply.message.get("tool_calls") or []):
        await out.send({"tool_calls": [{"index": index, **call}]})
    await out.send({}, reply.finish_reason)
