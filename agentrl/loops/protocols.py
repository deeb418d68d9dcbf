"""The seams a loop and the rollout manager rely on, as protocols: what generates tokens, what it returns, and
the tokenizer. `agentrl.rollout.client.LLMClient` and a transformers tokenizer satisfy them; so do the scripted
fakes of `agentrl.loops.testing`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from agentrl.rollout.protocol import SamplingParams


class Generation(Protocol):
    """One generation: the tokens as the server produced them, never re-tokenized."""

    token_ids: Sequence[int]
    logprobs: list[float] | None
    finish_reason: str | None
    """`stop`, `length` or `abort`."""
    policy_version: int | None
    """The version of the weights that generated the tokens, when known."""


Piece = tuple[list[int], list[float] | None, int | None]
"""`(token_ids, logprobs, version)`: tokens one policy version generated (one trainable segment)."""


def pieces_of(out: Generation) -> list[Piece]:
    """The generation's tokens split by the version that generated each (`TokenOutput.pieces` when the server
    labelled spans of tokens: a request that ran across a weight update), else one piece."""
    split = getattr(out, "pieces", None)
    if callable(split):
        return list(split())
    return [(list(out.token_ids), out.logprobs, out.policy_version)]


class TokenGenerator(Protocol):
    """Token ids in, a `Generation` out (see `agentrl.rollout.client.LLMClient`)."""

    async def generate(
        self, prompt_ids: list[int], sampling: SamplingParams, session_id: str | None = None
    ) -> Generation: ...


TokenSink = Callable[[list[int]], Awaitable[None]]
"""Called with each chunk of a streamed generation's new token ids, as they arrive."""


@runtime_checkable
class StreamingTokenGenerator(TokenGenerator, Protocol):
    """A `TokenGenerator` that can also hand the tokens on as they are generated (`LLMClient` does)."""

    async def generate_stream(
        self, prompt_ids: list[int], sampling: SamplingParams, session_id: str | None = None, *, on_tokens: TokenSink
    ) -> Generation: ...


class Tokenizer(Protocol):
    """The part of a Hugging Face tokenizer agentrl uses: encoding, decoding and the chat template."""

    eos_token_id: int | None
    pad_token_id: int | None
    unk_token_id: int | None
    chat_template: str | None

    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]: ...

    def decode(self, token_ids: Sequence[int], skip_special_tokens: bool = ...) -> str: ...

    def convert_tokens_to_ids(self, tokens: str) -> int | None: ...

    def apply_chat_template(self, conversation: list[dict[str, Any]], **kwargs: Any) -> Any: ...
