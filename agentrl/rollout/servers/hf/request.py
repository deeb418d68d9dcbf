"""One generation request as the engine sees it, and what it hands back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import torch

from agentrl.rollout.protocol import FinishReason, SamplingParams

TopLogprobs = list[tuple[int, float]]


class RequestError(ValueError):
    """A request the engine refuses up front (too long, bad token ids, ...); maps to HTTP 400."""


class EngineShutdownError(RuntimeError):
    """The engine stopped before the request finished."""


class AdapterNotLoadedError(RuntimeError):
    """A request needs a LoRA adapter this server has not been given yet (maps to HTTP 503: try another replica)."""


class Detokenizer(Protocol):
    """What the engine needs from a tokenizer: turning token ids back into text."""

    def decode(self, token_ids: list[int], skip_special_tokens: bool = ...) -> str: ...


@dataclass
class GenerationOutput:
    """The result of one request: generated tokens, their logprobs and why generation stopped."""

    request_id: str
    prompt_token_ids: list[int]
    token_ids: list[int]
    logprobs: list[float]
    finish_reason: FinishReason
    policy_version: int
    text: str | None = None
    stop_reason: int | str | None = None
    top_logprobs: list[TopLogprobs] | None = None


@dataclass(eq=False)
class GenRequest:
    """A request in flight: its inputs, sampling state and the tokens produced so far.

    `on_done` is called exactly once, from the engine thread, with a `GenerationOutput` or an exception;
    `on_token`, when set, with each token as it is sampled (streaming).
    """

    request_id: str
    prompt_ids: list[int]
    sampling: SamplingParams
    on_done: Callable[[GenerationOutput | BaseException], None]
    top_logprobs: int = 0
    ignore_eos: bool = False
    generator: torch.Generator | None = None
    adapter: str | None = None
    """The LoRA adapter that serves it (None: the base model)."""
    output_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    top: list[TopLogprobs] | None = None
    finish_reason: FinishReason | None = None
    stop_reason: int | str | None = None
    text: str | None = None
    aborted: bool = False
    on_token: Callable[[int, float, TopLogprobs | None], None] | None = None

    def append(self, token_id: int, logprob: float, top: TopLogprobs | None) -> None:
        """Record one generated token."""
        self.output_ids.append(token_id)
        self.logprobs.append(logprob)
        if top is not None:
            if self.top is None:
                self.top = []
            self.top.append(top)
        if self.on_token is not None:
            self.on_token(token_id, logprob, top)

    def finish(self, reason: FinishReason, stop_reason: int | str | None = None) -> None:
        """Mark the request finished."""
        self.finish_reason = reason
        self.stop_reason = stop_reason

    def to_output(self, policy_version: int, detok: Detokenizer | None) -> GenerationOutput:
        """Freeze the request into its `GenerationOutput`."""
        text = self.text
        if text is None and detok is not None:
            text = detok.decode(self.output_ids, skip_special_tokens=True)
        return GenerationOutput(
            request_id=self.request_id,
            prompt_token_ids=self.prompt_ids,
            token_ids=self.output_ids,
            logprobs=self.logprobs,
            finish_reason=self.finish_reason or "abort",
            policy_version=policy_version,
            text=text,
            stop_reason=self.stop_reason,
            top_logprobs=self.top,
        )
