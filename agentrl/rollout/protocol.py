"""Wire protocol between the rollout client and rollout servers.

The request and response fields are vLLM's OpenAI-compatible ones (`return_token_ids`, `logprobs`,
`stop_token_ids`, `top_k`, ...), so the same client talks to vLLM and to our built-in `hf` server. Fields our
`hf` server adds beyond vLLM (`policy_version`) are optional for the client.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

FinishReason = Literal["stop", "length", "abort"]


class SamplingParams(BaseModel):
    """How to sample one completion."""

    model_config = ConfigDict(extra="forbid")

    temperature: float = Field(1.0, ge=0.0, description="0 means greedy")
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    top_k: int = Field(-1, description="-1 disables top-k")
    max_tokens: int = Field(256, ge=1)
    stop: list[str] = Field(default_factory=list)
    stop_token_ids: list[int] = Field(default_factory=list)
    seed: int | None = None

    def request_fields(self, seed_key: str = "seed") -> dict[str, Any]:
        """The sampling fields of a server request (vLLM's names): temperature, top_p, top_k, and the stops and
        seed where set; `seed_key` names the seed (SGLang's `sampling_seed`). The token budget is each route's own."""
        fields: dict[str, Any] = {"temperature": self.temperature, "top_p": self.top_p, "top_k": self.top_k}
        if self.stop:
            fields["stop"] = list(self.stop)
        if self.stop_token_ids:
            fields["stop_token_ids"] = list(self.stop_token_ids)
        if self.seed is not None:
            fields[seed_key] = self.seed
        return fields


class CompletionRequest(BaseModel):
    """`POST /v1/completions` body (vLLM-compatible subset)."""

    model_config = ConfigDict(extra="ignore")

    model: str = ""
    prompt: list[int] | str
    max_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    stop: list[str] | str | None = None
    stop_token_ids: list[int] | None = None
    seed: int | None = None
    logprobs: int | None = None
    return_token_ids: bool = False
    stream: bool = False
    request_id: str | None = None


class CompletionLogprobs(BaseModel):
    tokens: list[str] = Field(default_factory=list)
    token_logprobs: list[float] = Field(default_factory=list)
    top_logprobs: list[dict[str, float]] | None = None
    text_offset: list[int] = Field(default_factory=list)


class CompletionChoice(BaseModel):
    index: int = 0
    text: str
    token_ids: list[int] | None = None
    prompt_token_ids: list[int] | None = None
    logprobs: CompletionLogprobs | None = None
    finish_reason: FinishReason | None
    stop_reason: int | str | None = Field(None, description="the stop token id or stop string that ended it")


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class CompletionResponse(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str
    object: str = "text_completion"
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: Usage
    policy_version: int | None = None


class ErrorBody(BaseModel):
    message: str
    type: str = "BadRequestError"
    code: int = 400
    param: str | None = None


class ErrorResponse(BaseModel):
    """OpenAI error shape: `{"error": {"message": ..., "type": ..., "code": ...}}`."""

    error: ErrorBody


class WeightUpdateRequest(BaseModel):
    """`POST /v1/weights` body (agentrl extension of the `hf` server).

    Either `path` names a safetensors file the server can read (shared memory or disk), or the state dict is
    sent as the raw safetensors body with `Content-Type: application/octet-stream` and the version in the
    `X-Policy-Version` header. Either may instead be a delta against the weights the server holds
    (`agentrl.weight_delta`: it carries its own base, version and id; 409 when the server holds another base).
    """

    path: str
    version: int
    in_flight: Literal["finish", "abort"] = "finish"
    adapter: str | None = None
    """A LoRA adapter's name: the file holds its tensors only (`X-Adapter` for a raw body)."""
    lora_alpha: float = Field(16.0, gt=0)
    """The adapter's alpha (scaling alpha / rank; `X-Lora-Alpha` for a raw body)."""
    weights_id: str | None = None
    """The id the server's weights get (`X-Weights-Id`), which a later delta names as its base; default: a new one."""


def error_payload(message: str, code: int = 400, type_: str = "BadRequestError") -> dict[str, Any]:
    """An OpenAI-shaped error body."""
    return ErrorResponse(error=ErrorBody(message=message, code=code, type=type_)).model_dump()
