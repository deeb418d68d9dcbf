"""`/v1/completions` with `stream: true`: server-sent events as vLLM sends them, one chunk per batch of sampled tokens.

Each chunk's choice carries the new `text`, and, as asked, the new `token_ids` (`return_token_ids`) and their
`logprobs` (the tokens' own and their alternatives'); the first chunk has `prompt_token_ids`, the last one the
`finish_reason` and (beyond vLLM) the `policy_version` of the weights that sampled every token of it.
`data: [DONE]` ends the stream.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

from agentrl.rollout.servers.hf.engine import StreamedToken
from agentrl.rollout.servers.hf.request import GenerationOutput
from agentrl.rollout.servers.hf.responses import token_strings
from agentrl.rollout.servers.hf.schemas import HFCompletionRequest


class TextDeltas:
    """The text of a growing generation, handed out in pieces that never need taking back: characters that a stop
    string may still cut (the longest one's length less one) and a half-decoded character are held back."""

    def __init__(self, tokenizer: Any, stops: list[str]) -> None:
        self.tokenizer = tokenizer
        self.hold = max((len(s) for s in stops if s), default=1) - 1
        self.ids: list[int] = []
        self.sent = ""

    def push(self, ids: list[int]) -> str:
        """The new text that `ids` settle."""
        self.ids += ids
        text = self.tokenizer.decode(self.ids, skip_special_tokens=True)
        text = text[: len(text) - self.hold].rstrip("\ufffd")
        return self._send(text) if text.startswith(self.sent) else ""

    def finish(self, final: str) -> str:
        """What is left of the final text (stop string cut) once the generation ended."""
        return self._send(final) if final.startswith(self.sent) else ""

    def _send(self, text: str) -> str:
        delta, self.sent = text[len(self.sent) :], text
        return delta


async def completion_events(
    events: AsyncIterator[list[StreamedToken] | GenerationOutput],
    body: HFCompletionRequest,
    prompt: list[int],
    model: str,
    tokenizer: Any,
) -> AsyncIterator[str]:
    """The SSE lines of one streamed completion, from `HFEngine.stream` events."""
    head: dict[str, Any] = {"id": f"cmpl-{body.request_id or time.monotonic_ns()}", "object": "text_completion"}
    head.update({"created": int(time.time()), "model": model})
    text = TextDeltas(tokenizer, body.sampling().stop)
    first = True
    async for event in events:
        chunk: dict[str, Any] = dict(head)
        if isinstance(event, GenerationOutput):
            choice = _choice(body, tokenizer, text.finish(event.text or ""), [], event.finish_reason)
            choice["stop_reason"] = event.stop_reason
            chunk["policy_version"] = event.policy_version
        else:
            choice = _choice(body, tokenizer, text.push([t for t, _, _ in event]), event, None)
        if first and body.return_token_ids:
            choice["prompt_token_ids"] = prompt
        first = False
        yield _sse({**chunk, "choices": [choice]})
    yield "data: [DONE]\n\n"


def _choice(
    body: HFCompletionRequest, tokenizer: Any, text: str, tokens: list[StreamedToken], finish: str | None
) -> dict[str, Any]:
    ids = [t for t, _, _ in tokens]
    choice: dict[str, Any] = {"index": 0, "text": text, "finish_reason": finish, "logprobs": None}
    if body.return_token_ids:
        choice["token_ids"] = ids
    if body.logprobs is not None:
        top = [dict(zip(token_strings(tokenizer, [a for a, _ in alts]), [lp for _, lp in alts], strict=True))
               for _, _, alts in tokens if alts is not None]  # fmt: skip
        choice["logprobs"] = {
            "tokens": token_strings(tokenizer, ids),
            "token_logprobs": [lp for _, lp, _ in tokens],
            "top_logprobs": top or None,
        }
    return choice


def _sse(data: dict[str, Any]) -> str:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"
