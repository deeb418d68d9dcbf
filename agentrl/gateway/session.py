"""One agent run's session at the gateway: its recorder, sampling settings and budgets."""

from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from agentrl.gateway.recorder import Reply, SessionRecorder
from agentrl.gateway.validation import read_request
from agentrl.loops.protocols import Generation, Piece, StreamingTokenGenerator, TokenGenerator, TokenSink
from agentrl.loops.resume import generate_resuming
from agentrl.rollout.protocol import SamplingParams
from agentrl.types import StopReason

HONOURED_FIELDS = ("temperature", "top_p", "seed")
"""Request fields that change the sampling when the session honours the agent's own settings."""


@dataclass
class SessionLimits:
    """The trajectory's budgets, enforced at the gateway (the agent gets an error saying which one it hit).

    Attributes:
        max_turns: chat calls (stop reason max_turns).
        max_tokens_per_turn: tokens one reply may have; an agent's `max_tokens` can only lower it.
        max_total_tokens: prompt + reply tokens of one step sample (context_overflow).
        max_wall_s: seconds from the session's start (time_budget); None: no limit.
    """

    max_turns: int = 8
    max_tokens_per_turn: int = 256
    max_total_tokens: int = 2048
    max_wall_s: float | None = None


class BudgetExceeded(Exception):
    """A call the session's budgets refuse; the session ends with `reason`."""

    def __init__(self, reason: StopReason, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class SessionClosed(Exception):
    """A call to a session that ended or never existed."""


@dataclass
class GatewaySession:
    """One trajectory's conversation with the policy through the gateway.

    Attributes:
        recorder: its calls and step samples.
        sampling: the run's sampling settings (its `max_tokens` caps each reply, as `limits.max_tokens_per_turn`
            does; the agent's `max_tokens` and `stop` always apply; `temperature`, `top_p` and `seed` only with
            `honour_request_sampling`).
        limits: the budgets.
        honour_request_sampling: take the agent's own temperature/top_p/seed (evaluation) rather than the run's.
        resume_aborted: a generation a weight push aborts continues from its exact prefix (partial rollouts).
        id: the unguessable id in the session's URL.
    """

    recorder: SessionRecorder
    sampling: SamplingParams = field(default_factory=SamplingParams)
    limits: SessionLimits = field(default_factory=SessionLimits)
    honour_request_sampling: bool = False
    resume_aborted: bool = False
    id: str = field(default_factory=lambda: secrets.token_urlsafe(18))
    base_url: str = ""
    stop_reason: StopReason | None = None
    stop_message: str = ""
    started: float = field(default_factory=time.monotonic)
    metrics: dict[str, float] = field(default_factory=dict)
    closed: bool = False

    def __post_init__(self) -> None:
        self.lock = asyncio.Lock()  # an agent's parallel calls are recorded one after the other

    async def chat(self, llm: TokenGenerator, request: dict[str, Any], on_tokens: TokenSink | None = None) -> Reply:
        """Answer one chat-completions request body: prompt, budgets, generation, record.

        With `on_tokens`, the generated token ids are handed to it as they arrive (streamed from the rollout server
        when `llm` streams, else all at once), before the reply is recorded.

        Raises:
            SessionClosed: the session was closed.
            BudgetExceeded: a budget refuses the call (the session then ends with that stop reason).
            ValueError: the request cannot be read.
        """
        messages, tools = read_request(request)
        async with self.lock:
            self._check_open()
            self._check_turns_and_time()
            prompt = self.recorder.prompt(messages, tools)
            sampling = self._sampling(request, len(prompt))
            pieces, finish = await self._generate(llm, prompt, sampling, on_tokens)
            if self.closed:  # the trajectory was handed over while this call generated: it must not change
                raise SessionClosed("this session ended while the call was generating; start a new one")
            return self.recorder.record(
                pieces, finish, parse_tool_calls=parses_tool_calls(request), temperature=sampling.temperature
            )

    def end(self, reason: StopReason, message: str = "") -> None:
        """End the session with `reason` (later calls are refused with `message`)."""
        if self.stop_reason is None:
            self.stop_reason, self.stop_message = reason, message or reason.value

    def unanswered(self) -> str:
        """Why the session has nothing to train on, when none of its calls was answered."""
        reason = f": {self.stop_message}" if self.stop_message else ""
        return f"no call was answered ({len(self.recorder.calls)} refused or failed){reason}"

    def _check_open(self) -> None:
        if self.closed:
            raise SessionClosed("this session has ended (its trajectory is over); start a new one")
        if self.stop_reason is not None:
            raise BudgetExceeded(self.stop_reason, self.stop_message)

    def _check_turns_and_time(self) -> None:
        if len([c for c in self.recorder.calls if c.output_ids]) >= self.limits.max_turns:
            self._refuse(StopReason.MAX_TURNS, f"turn budget spent: {self.limits.max_turns} calls per trajectory")
        wall = self.limits.max_wall_s
        if wall is not None and time.monotonic() - self.started > wall:
            self._refuse(StopReason.TIME_BUDGET, f"time budget spent: {wall:g} s per trajectory")

    def _sampling(self, request: dict[str, Any], prompt_len: int) -> SamplingParams:
        room = self.limits.max_total_tokens - prompt_len
        if room <= 0:
            self._refuse(
                StopReason.CONTEXT_OVERFLOW,
                f"token budget spent: the prompt has {prompt_len} tokens, the limit is {self.limits.max_total_tokens}",
            )
        cap = min(self.limits.max_tokens_per_turn, self.sampling.max_tokens)
        asked = request.get("max_completion_tokens") or request.get("max_tokens") or cap
        update: dict[str, Any] = {"max_tokens": max(1, min(int(asked), cap, room))}
        stop = request.get("stop")
        if stop:
            update["stop"] = [stop] if isinstance(stop, str) else list(stop)
        if self.honour_request_sampling:
            update.update({k: request[k] for k in HONOURED_FIELDS if request.get(k) is not None})
        elif self.sampling.seed is not None:
            update["seed"] = self.sampling.seed + len(self.recorder.calls)
        return self.sampling.model_copy(update=update)

    def _refuse(self, reason: StopReason, message: str) -> None:
        self.end(reason, message)
        raise BudgetExceeded(reason, message)

    async def _generate(
        self, llm: TokenGenerator, prompt: list[int], sampling: SamplingParams, on_tokens: TokenSink | None
    ) -> tuple[list[Piece], str]:
        """One generation, continued from its exact prefix after each abort when `resume_aborted`."""

        async def once(ids: list[int], left: SamplingParams) -> Generation:
            return await _one_generation(llm, ids, left, self.id, on_tokens)

        out = await generate_resuming(once, prompt, sampling, self.resume_aborted, self.metrics)
        return out.pieces, out.finish_reason or "stop"


def parses_tool_calls(request: dict[str, Any]) -> bool:
    """Whether a reply to `request` is parsed for tool calls: it offered tools and did not say `tool_choice: none`."""
    return bool(request.get("tools")) and request.get("tool_choice") != "none"


async def _one_generation(
    llm: TokenGenerator, prompt: list[int], sampling: SamplingParams, session_id: str, on_tokens: TokenSink | None
) -> Generation:
    if on_tokens is not None and isinstance(llm, StreamingTokenGenerator):
        return await llm.generate_stream(prompt, sampling, session_id=session_id, on_tokens=on_tokens)
    out = await llm.generate(prompt, sampling, session_id=session_id)
    if on_tokens is not None and out.token_ids:
        await on_tokens(list(out.token_ids))
    return out
