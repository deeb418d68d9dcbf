"""Request bodies of the `hf` server beyond `agentrl.rollout.protocol` (chat, abort, vLLM extras)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentrl.rollout.protocol import CompletionRequest, SamplingParams


class HFCompletionRequest(CompletionRequest):
    """`POST /v1/completions`: the protocol's request plus vLLM's `ignore_eos` and agentrl's `lora_adapter` (the
    adapter that must generate: 503 while it is not loaded, unlike a `model` name, which falls back to the base)."""

    ignore_eos: bool = False
    n: int = 1
    lora_adapter: str | None = None

    def sampling(self) -> SamplingParams:
        return to_sampling(self, self.max_tokens)


class ChatCompletionRequest(BaseModel):
    """`POST /v1/chat/completions` (OpenAI fields plus vLLM's `return_token_ids`, `top_k`, ...)."""

    model_config = ConfigDict(extra="ignore")

    model: str = ""
    messages: list[dict[str, Any]]
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    stop: list[str] | str | None = None
    stop_token_ids: list[int] | None = None
    seed: int | None = None
    logprobs: bool = False
    top_logprobs: int = 0
    return_token_ids: bool = False
    stream: bool = False
    n: int = 1
    ignore_eos: bool = False
    request_id: str | None = None
    tools: list[dict[str, Any]] | None = None
    add_generation_prompt: bool = True
    continue_final_message: bool = False
    chat_template_kwargs: dict[str, Any] = Field(default_factory=dict)

    def sampling(self, default_max_tokens: int) -> SamplingParams:
        """Sampling params; without `max_tokens` the completion may fill the rest of the context (as vLLM)."""
        limit = self.max_completion_tokens or self.max_tokens or default_max_tokens
        return to_sampling(self, limit)


class PathProbe(BaseModel):
    """`POST /v1/weights/probe`: does the server see the client's file `path`, holding `token`?"""

    path: str
    token: str


class AbortRequest(BaseModel):
    """`POST /v1/abort`: one request id, a list of them, or none for all."""

    request_id: str | list[str] | None = None


def to_sampling(req: HFCompletionRequest | ChatCompletionRequest, max_tokens: int) -> SamplingParams:
    """The protocol's `SamplingParams` of a request (validated: raises pydantic's ValidationError)."""
    stop = [req.stop] if isinstance(req.stop, str) else list(req.stop or [])
    return SamplingParams(
        temperature=req.temperature,
        top_p=req.top_p,
        top_k=req.top_k,
        max_tokens=max_tokens,
        stop=stop,
        stop_token_ids=list(req.stop_token_ids or []),
        seed=req.seed,
    )
