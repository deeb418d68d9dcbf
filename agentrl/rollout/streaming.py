"""Reading a streamed `/v1/completions` answer (server-sent events, vLLM's chunk shape) into token ids.

Each chunk's choice carries the new `token_ids` and their `logprobs.token_logprobs` (the request asks for
`return_token_ids` and `logprobs: 1`); the last one the `finish_reason`. The generated text is never re-tokenized.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, Awaitable, Callable
from typing import Any

from agentrl.rollout.errors import ProtocolError, ServerRequestError, error_message

TokenSink = Callable[[list[int]], Awaitable[None]]
"""Called with each chunk's new token ids, as they arrive."""


class SinkFailed(Exception):
    """`on_tokens` raised `error` (the reader went away): not a failure of the rollout server."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


class CompletionStream:
    """The tokens of one streamed completion, as they arrive (`feed`), handed to `on_tokens` chunk by chunk."""

    def __init__(self, url: str, on_tokens: TokenSink, normalize: Callable[[Any, str], Any] | None = None) -> None:
        self.url, self.on_tokens, self.normalize = url, on_tokens, normalize
        self.version_spans: list[Any] | None = None
        self.token_ids: list[int] = []
        self.logprobs: list[float] = []
        self.finish_reason: str | None = None
        self.policy_version: int | None = None
        self.prompt_token_ids: list[int] | None = None
        self.done = False

    async def feed(self, lines: AsyncIterable[bytes]) -> None:
        """Read SSE lines until `data: [DONE]` (or the end of the body)."""
        async for raw in lines:
            line = raw.decode().strip()
            if not line.startswith("data:"):
                continue
            data = line.removeprefix("data:").strip()
            if data == "[DONE]":
                self.done = True
                return
            await self._chunk(json.loads(data))

    async def _chunk(self, data: Any) -> None:
        if isinstance(data, dict) and "error" in data:
            raise ServerRequestError(self.url, 500, error_message(json.dumps(data)))
        if self.normalize is not None:  # another route's chunk (vLLM's generate), in /v1/completions shape
            data = self.normalize(data, self.url)
        try:
            choice = data["choices"][0] if data["choices"] else {}
        except (KeyError, IndexError, TypeError) as e:
            raise ProtocolError(f"rollout server {self.url} sent a malformed stream chunk: {data!r:.300}") from e
        if data.get("policy_version") is not None:
            self.policy_version = data["policy_version"]
        if choice.get("version_spans") is not None:
            self.version_spans = choice["version_spans"]
        if choice.get("prompt_token_ids") is not None:
            self.prompt_token_ids = choice["prompt_token_ids"]
        self.finish_reason = choice.get("finish_reason") or self.finish_reason
        ids = choice.get("token_ids")
        if ids is None and choice.get("text"):
            raise ProtocolError(
                f"rollout server {self.url} streamed no token ids; it must support `return_token_ids` "
                "(vLLM >= 0.10.2, or agentrl's `hf` server)"
            )
        logprobs = (choice.get("logprobs") or {}).get("token_logprobs") or []
        if len(logprobs) != len(ids or []):
            raise ProtocolError(
                f"rollout server {self.url} streamed {len(logprobs)} logprobs for {len(ids or [])} tokens; "
                "it must support `logprobs: 1` on /v1/completions"
            )
        if ids:
            self.token_ids += ids
            self.logprobs += logprobs
            try:
                await self.on_tokens(list(ids))
            except Exception as e:
                raise SinkFailed(e) from e
