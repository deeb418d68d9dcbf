"""The scripted policy `check_loop` plays against: it records every generation with the prompt it was asked for,
reports a new version each time, and can abort one reply part-way as a weight push does (partial rollouts)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from agentrl.loops.conformance.case import LoopCheckCase
from agentrl.loops.testing import ScriptedOutput, ScriptedPolicy
from agentrl.rollout.protocol import SamplingParams

VERSION = 7
"""The policy version of the scripted policy's first generation; each one after it reports the next (not 0, so that
a loop that fills in a default is caught; a new one each time, so that a stale, cached or merged version is)."""


@dataclass
class Generated:
    """One generation of the scripted policy (a reply, or a piece of a reply that an abort cut): the prompt it was
    generated from, its tokens, the logprob of each exactly as returned, the version it reported and the
    temperature it was sampled at."""

    prompt: list[int]
    token_ids: list[int]
    logprobs: list[float]
    version: int
    temperature: float


@dataclass
class _Rest:
    """What an aborted reply had left: the prompt that continues it (the prompt and the tokens so far), the tokens
    and how it ends."""

    prompt: list[int]
    token_ids: list[int]
    finish_reason: str


class RecordingPolicy(ScriptedPolicy):
    """A scripted policy (the case's reply every turn) that reports a new version for every generation (`VERSION`,
    then the next), a distinct logprob for every token it generates (so that tokens appended anywhere but verbatim
    are told apart), and records each generation with its prompt (`generated`).

    With `abort`, it aborts the first reply of two tokens or more half-way (finish_reason `abort`, as a weight push
    does); asked to continue it from its exact prefix, it generates the rest under the next version (`resumed`).
    `delay_s` slows every call (`started` is set as the first one begins: for cancellation); `fail_with` raises on
    every call. Its streaming is `ScriptedPolicy`'s, over this `generate`."""

    def __init__(
        self,
        tokenizer: Any,
        case: LoopCheckCase,
        delay_s: float = 0.0,
        fail_with: Exception | None = None,
        abort: bool = False,
    ):
        super().__init__(tokenizer, [case.reply], delay_s=delay_s, fail_with=fail_with)
        self.generated: list[Generated] = []
        self.started = asyncio.Event()
        self.abort = abort
        self.aborted = False
        self.resumed = False
        self._rest: _Rest | None = None

    async def generate(
        self, prompt_ids: list[int], sampling: SamplingParams, session_id: str | None = None
    ) -> ScriptedOutput:
        self.started.set()
        if self._rest is not None and list(prompt_ids) == self._rest.prompt:
            out = await self._continue(prompt_ids, sampling)
        else:
            out = await super().generate(prompt_ids, sampling, session_id)
            if self.abort and not self.aborted and len(out.token_ids) >= 2:
                self._cut(out, prompt_ids)
        first = sum(len(g.token_ids) for g in self.generated)  # a check episode: a few replies
        out.logprobs = [-(first + i + 1) / 1024 for i in range(len(out.token_ids))]
        out.policy_version = VERSION + len(self.generated)
        self.generated.append(
            Generated(
                list(prompt_ids), list(out.token_ids), list(out.logprobs), out.policy_version, sampling.temperature
            )
        )
        return out

    def _cut(self, out: ScriptedOutput, prompt_ids: list[int]) -> None:
        """Abort `out` half-way, keeping what it had left for a continuation from its exact prefix."""
        half = len(out.token_ids) // 2
        kept, rest = list(out.token_ids[:half]), list(out.token_ids[half:])
        self._rest = _Rest([*prompt_ids, *kept], rest, out.finish_reason)
        out.token_ids, out.finish_reason = kept, "abort"
        self.aborted = True

    async def _continue(self, prompt_ids: list[int], sampling: SamplingParams) -> ScriptedOutput:
        """The aborted reply's rest, generated from its exact prefix (cut at `max_tokens`, as a server would)."""
        assert self._rest is not None
        self.calls.append(list(prompt_ids))
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.fail_with is not None:
            raise self.fail_with
        rest, self._rest, self.resumed = self._rest, None, True
        ids, finish = rest.token_ids, rest.finish_reason
        if len(ids) > sampling.max_tokens:
            ids, finish = ids[: sampling.max_tokens], "length"
        return ScriptedOutput(token_ids=ids, logprobs=[], finish_reason=finish)


__all__ = ["VERSION", "Generated", "RecordingPolicy"]
