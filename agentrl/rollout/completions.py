"""One token-in/token-out completion on the wire: the request body, and the answer as tokens, logprobs and the
version of the weights that generated them (`TokenOutput`), as every backend reports it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentrl.rollout.errors import ProtocolError
from agentrl.rollout.protocol import SamplingParams
from agentrl.rollout.vllm_generate import VersionSpan, check_spans


@dataclass(slots=True)
class TokenOutput:
    """One generated completion, as tokens.

    Attributes:
        token_ids: Generated token ids, exactly as the server returned them.
        logprobs: Log-probability of each generated token under the sampling policy (same length).
        finish_reason: `stop`, `length` or `abort` (as the server says).
        policy_version: Version of the weights that generated the tokens, if known.
        prompt_token_ids: The prompt as the server saw it, when it echoes it.
        replica: Base URL of the replica that answered.
    """

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str | None
    policy_version: int | None
    prompt_token_ids: list[int] | None = None
    replica: str = ""
    version_spans: list[VersionSpan] | None = None
    """`(start, end, version)` over the output tokens, when the server labels each token (vLLM's generate route);
    several spans: the request generated across a weight update."""

    def pieces(self) -> list[tuple[list[int], list[float], int | None]]:
        """`(token_ids, logprobs, version)` of each run of tokens one policy version generated (one piece unless
        the server reported several versions): each becomes its own trainable segment."""
        spans = self.version_spans or [(0, len(self.token_ids), self.policy_version)]
        return [(self.token_ids[a:b], self.logprobs[a:b], v) for a, b, v in spans if b > a] or [
            ([], [], self.policy_version)
        ]


def parse_completion(url: str, data: Any) -> TokenOutput:
    """A `/v1/completions` answer (or a generate answer in its shape) as a `TokenOutput`; `ProtocolError` when
    it lacks token ids or one logprob per token, or its version spans do not cover the tokens."""
    try:
        choice = data["choices"][0]
    except (KeyError, IndexError, TypeError) as e:
        raise ProtocolError(f"rollout server {url} sent a malformed completion: {data!r:.300}") from e
    token_ids = choice.get("token_ids")
    if token_ids is None:
        raise ProtocolError(
            f"rollout server {url} returned no token ids; the server must support `return_token_ids` "
            "(vLLM >= 0.10.2, or agentrl's `hf` server)"
        )
    logprobs = (choice.get("logprobs") or {}).get("token_logprobs")
    if logprobs is None or len(logprobs) != len(token_ids):
        got = "none" if logprobs is None else f"{len(logprobs)}"
        raise ProtocolError(
            f"rollout server {url} returned {got} logprobs for {len(token_ids)} tokens; "
            "it must support `logprobs: 1` on /v1/completions"
        )
    spans = choice.get("version_spans")
    if spans is not None:
        check_spans(spans, len(token_ids), url)
    return TokenOutput(
        token_ids=token_ids,
        logprobs=logprobs,
        finish_reason=choice.get("finish_reason"),
        policy_version=spans[-1][2] if spans else reported_version(data),
        version_spans=spans,
        prompt_token_ids=choice.get("prompt_token_ids"),
        replica=url,
    )


def reported_version(data: Any) -> int | None:
    """The policy version a server reported for its reply: `policy_version` (agentrl's `hf` server) or SGLang's
    `metadata.weight_version` (vLLM's per-token labels come with its generate route, `version_spans`); None when
    the server says nothing (the tokens then count as of unknown version in `rollout/version_known`: never guessed
    from the client's side)."""
    if not isinstance(data, dict):
        return None
    if (version := data.get("policy_version")) is not None:
        return as_version(version)
    metadata = data.get("metadata")
    return as_version(metadata.get("weight_version")) if isinstance(metadata, dict) else None


def as_version(raw: Any) -> int | None:
    """An integer version, from an int or a numeric string; None for anything else (SGLang's "default" included:
    the weights it loaded before any update, which agentrl always replaces with version 0's push)."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw
    try:
        return int(str(raw))
    except ValueError:
        return None


def completion_body(prompt_ids: list[int], sampling: SamplingParams, model: str = "") -> dict[str, Any]:
    """The `/v1/completions` request body for a token-in/token-out call (vLLM field names)."""
    body: dict[str, Any] = {
        "prompt": prompt_ids,
        "max_tokens": sampling.max_tokens,
        **sampling.request_fields(),
        "logprobs": 1,
        "return_token_ids": True,
    }
    if model:
        body["model"] = model
    return body
