"""A scripted policy for unit and fault tests: replies with fixed text, as exact token ids. Not a model."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from agentrl.rollout.protocol import SamplingParams

Reply = str | Callable[[str], str]


@dataclass
class ScriptedOutput:
    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str
    policy_version: int = 0


class ScriptedPolicy:
    """Answers each `generate` call with the next scripted reply, tokenized and ended with the EOS token.

    A reply may be a callable receiving the decoded conversation so far. Replies longer than
    `sampling.max_tokens` are cut there with finish_reason "length", and a reply holding one of `sampling.stop`
    ends with it (no EOS token), as a server would. `delay_s` simulates
    generation latency; `fail_with` raises on every call (fault injection).
    """

    def __init__(self, tokenizer: Any, replies: list[Reply], delay_s: float = 0.0, fail_with: Exception | None = None):
        self.tokenizer = tokenizer
        self.replies = list(replies)
        self.delay_s = delay_s
        self.fail_with = fail_with
        self.calls: list[list[int]] = []
        self.streamed = 0

    async def generate(
        self, prompt_ids: list[int], sampling: SamplingParams, session_id: str | None = None
    ) -> ScriptedOutput:
        self.calls.append(list(prompt_ids))
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.fail_with is not None:
            raise self.fail_with
        reply = self.replies[min(len(self.calls), len(self.replies)) - 1]
        text = reply(self.tokenizer.decode(prompt_ids)) if callable(reply) else reply
        stopped = _through_stop(text, sampling.stop)
        ids = self.tokenizer.encode(text if stopped is None else stopped, add_special_tokens=False)
        if stopped is None:
            ids.append(self.tokenizer.eos_token_id)
        finish = "stop"
        if len(ids) > sampling.max_tokens:
            ids, finish = ids[: sampling.max_tokens], "length"
        return ScriptedOutput(token_ids=ids, logprobs=[-0.5] * len(ids), finish_reason=finish)

    async def generate_stream(
        self,
        prompt_ids: list[int],
        sampling: SamplingParams,
        session_id: str | None = None,
        *,
        on_tokens: Callable[[list[int]], Awaitable[None]],
    ) -> ScriptedOutput:
        """`generate`, handing the reply's tokens on one at a time (`streamed` counts the hand-overs)."""
        out = await self.generate(prompt_ids, sampling, session_id)
        for token in out.token_ids:
            await on_tokens([token])
            self.streamed += 1
        return out


def _through_stop(text: str, stop: list[str]) -> str | None:
    """`text` up to the end of the first stop string it holds (where a server stops), or None when it holds none."""
    hits = [(text.find(s), s) for s in stop if s and s in text]
    if not hits:
        return None
    at, sequence = min(hits)
    return text[: at + len(sequence)]
