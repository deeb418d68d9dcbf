"""SGLang's native token-in/token-out route, `POST /generate`: the SGLang route whose stream says which weights
generated the tokens.

Every answer and every stream chunk has `meta_info.weight_version`, the label of the weights SGLang serves (set by
agentrl with each update, `"default"` before any); `/v1/completions` reports it for a whole reply only, and its
stream chunks carry none. agentrl updates SGLang without pausing it, so an update waits for, or aborts, the
requests in flight (they hold SGLang's model-update lock) and one reply's tokens come from one version. A reply
without a numeric label has an unknown version (None): it is never filled in from the client's side.

Wire format (SGLang's `GenerateReqInput` and its tokenizer manager's output, checked against SGLang 0.5.23):
- request: `{"input_ids": [...], "sampling_params": {"max_new_tokens", "temperature", "top_p", "top_k",
  "stop", "stop_token_ids", "sampling_seed"}, "return_logprob": true, "logprob_start_len": -1, "stream": bool}`;
- response: `{"text", "output_ids": [...], "meta_info": {"finish_reason": {"type": "stop"|"length"|"abort",
  ...}, "output_token_logprobs": [[logprob, token_id, text|null], ...], "weight_version", "completion_tokens",
  ...}}`. Versions without `output_ids` are read from the token ids of `output_token_logprobs`.
- stream: `data: <response>` per chunk, then `data: [DONE]`; a chunk has the whole output so far (SGLang's
  default) or only its new tokens (`--incremental-streaming-output`), and `meta_info.completion_tokens` counts
  the tokens so far in both.
"""

from __future__ import annotations

from typing import Any

from agentrl.rollout.completions import TokenOutput, as_version
from agentrl.rollout.errors import ProtocolError
from agentrl.rollout.protocol import SamplingParams

GENERATE_PATH = "/generate"
_FINISH_TYPES = {"stop": "stop", "length": "length", "abort": "abort"}


def generate_request(prompt_ids: list[int], sampling: SamplingParams, stream: bool = False) -> dict[str, Any]:
    """The `/generate` body for one completion of `prompt_ids`, with logprobs of the output tokens only."""
    params = {"max_new_tokens": sampling.max_tokens, **sampling.request_fields(seed_key="sampling_seed")}
    return {
        "input_ids": list(prompt_ids),
        "sampling_params": params,
        "return_logprob": True,
        "logprob_start_len": -1,
        "stream": stream,
    }


def parse_generate_response(data: Any, url: str = "sglang") -> TokenOutput:
    """A `TokenOutput` from a `/generate` response, its version SGLang's `meta_info.weight_version` (None when it
    reports none, or `"default"`); raises `ProtocolError` if ids or logprobs are missing."""
    if isinstance(data, list):  # a batch answer: we always send one prompt
        if len(data) != 1:
            raise ProtocolError(f"{url} answered {len(data)} completions for one prompt")
        data = data[0]
    meta = _meta_info(data, url)
    token_ids, logprobs = _tokens(data, meta, url)
    return TokenOutput(
        token_ids=token_ids,
        logprobs=logprobs,
        finish_reason=parse_finish_reason(meta.get("finish_reason")),
        policy_version=as_version(meta.get("weight_version")),
        replica=url,
    )


def parse_finish_reason(reason: Any) -> str | None:
    """SGLang's `{"type": "stop"|"length"|"abort", ...}` (or a bare string) as `stop`, `length` or `abort`."""
    if reason is None:
        return None
    kind = reason.get("type") if isinstance(reason, dict) else str(reason)
    return _FINISH_TYPES.get(str(kind), str(kind))


class StreamChunks:
    """Reads one `/generate` stream's chunks, in either of SGLang's stream modes, as `/v1/completions` chunks:
    each chunk's new tokens and their logprobs, its finish reason, and the `policy_version` its `meta_info`
    reports (`agentrl.rollout.streaming.CompletionStream` keeps the last one reported)."""

    def __init__(self) -> None:
        self.seen = 0
        """Output tokens handed on so far."""

    def __call__(self, data: Any, url: str) -> dict[str, Any]:
        meta = _meta_info(data, url)
        total = meta.get("completion_tokens")
        if not isinstance(total, int) or total < self.seen:
            raise ProtocolError(
                f"{url} streamed a /generate chunk counting {total!r} output tokens after {self.seen} "
                "(meta_info.completion_tokens must count the tokens so far)"
            )
        entries = _new(_logprob_entries(meta, url), self.seen, total)
        output_ids = data.get("output_ids")
        token_ids = _new(list(output_ids), self.seen, total) if output_ids is not None else None
        if entries is None or (token_ids is not None and token_ids != [int(entry[1]) for entry in entries]):
            raise ProtocolError(
                f"{url} streamed a /generate chunk whose output_ids and output_token_logprobs do not hold "
                f"output tokens {self.seen}..{total}: {str(data)[:300]}"
            )
        self.seen = total
        choice = {
            "token_ids": [int(entry[1]) for entry in entries],
            "logprobs": {"token_logprobs": [float(entry[0]) for entry in entries]},
            "finish_reason": parse_finish_reason(meta.get("finish_reason")),
        }
        return {"choices": [choice], "policy_version": as_version(meta.get("weight_version"))}


def _new(items: list[Any], seen: int, total: int) -> list[Any] | None:
    """The items of output tokens `seen..total`, from a list of the whole output so far or of the new tokens only
    (the longer one cannot be new tokens only: they are fewer than `total` once any were seen); None if missing."""
    start = seen if len(items) >= total else 0
    part = items[start : start + total - seen]
    return part if len(part) == total - seen else None


def _meta_info(data: Any, url: str) -> dict[str, Any]:
    meta = data.get("meta_info") if isinstance(data, dict) else None
    if not isinstance(meta, dict):
        raise ProtocolError(f"{url} answered without meta_info: {str(data)[:200]}")
    return meta


def _logprob_entries(meta: dict[str, Any], url: str) -> list[Any]:
    entries = meta.get("output_token_logprobs")
    if entries is None:
        raise ProtocolError(f"{url} returned no output_token_logprobs; the request must set return_logprob")
    return list(entries)


def _tokens(data: dict[str, Any], meta: dict[str, Any], url: str) -> tuple[list[int], list[float]]:
    """The output token ids and their logprobs, checked against each other."""
    entries = _logprob_entries(meta, url)
    logprobs = [float(entry[0]) for entry in entries]
    logprob_ids = [int(entry[1]) for entry in entries]
    token_ids = data.get("output_ids")
    if token_ids is None:
        return logprob_ids, logprobs
    if logprob_ids != list(token_ids):
        raise ProtocolError(f"{url}: output_ids and the token ids of output_token_logprobs differ")
    return list(token_ids), logprobs
