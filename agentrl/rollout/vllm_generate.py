"""vLLM's token-in/token-out route, `POST /inference/v1/generate`: the one vLLM route that says which weights
generated each token.

vLLM (>= 0.32, started with `--enable-scale-out`) labels every output token with the engine's weight version at
the step that sampled it, and answers contiguous spans `{"version", "start", "end"}` over the output's token
indexes (`choices[0].weight_versions`; in a stream, on the final chunk). agentrl sets that version with
`/update_weight_version` while vLLM is paused for a weight update (`VLLMServer.update_weights`), so the label is
the engine's own record of the weights it held, never the client's guess, and a request that generated across
an update comes back as several spans, which become one segment per version.

Wire format, checked against vLLM 0.32.0 (`vllm/entrypoints/scale_out/token_in_token_out/protocol.py`):
- request: `{"token_ids": [...], "sampling_params": {"max_tokens", "temperature", "top_p", "top_k", "seed",
  "stop", "stop_token_ids", "logprobs": 1}, "stream": bool}`;
- response: `{"choices": [{"token_ids": [...], "finish_reason", "weight_versions": [...], "logprobs":
  {"content": [{"token_id", "logprob", "rank", "top_logprobs"}, ...]}}]}`.
"""

from __future__ import annotations

from typing import Any

from agentrl.rollout.errors import ProtocolError
from agentrl.rollout.protocol import SamplingParams

GENERATE_PATH = "/inference/v1/generate"
VersionSpan = tuple[int, int, int | None]
"""`(start, end, version)`: output tokens `[start, end)` were sampled by the weights of `version` (None: unknown)."""


def generate_body(prompt_ids: list[int], sampling: SamplingParams, model: str = "", stream: bool = False) -> dict:
    """The `/inference/v1/generate` body for one completion of `prompt_ids`, with each token's logprob."""
    params: dict[str, Any] = {"max_tokens": sampling.max_tokens, **sampling.request_fields(), "logprobs": 1}
    body: dict[str, Any] = {"token_ids": list(prompt_ids), "sampling_params": params, "stream": stream}
    if model:
        body["model"] = model
    return body


def as_completion(data: Any, url: str) -> dict[str, Any]:
    """A generate answer (or stream chunk) in `/v1/completions` shape: `choices[0]` with `token_ids`,
    `logprobs.token_logprobs`, `finish_reason`, and `version_spans` when vLLM sent `weight_versions`."""
    try:
        choice = data["choices"][0] if data["choices"] else {}
    except (KeyError, IndexError, TypeError) as e:
        raise ProtocolError(f"vLLM at {url} sent a malformed generate answer: {data!r:.300}") from e
    content = (choice.get("logprobs") or {}).get("content")
    out: dict[str, Any] = {
        "token_ids": choice.get("token_ids"),
        "finish_reason": choice.get("finish_reason"),
        "logprobs": {"token_logprobs": [entry["logprob"] for entry in content] if content is not None else None},
    }
    if choice.get("weight_versions") is not None:
        out["version_spans"] = version_spans(choice["weight_versions"])
    return {"choices": [out] if data["choices"] else []}


def version_spans(raw: list[dict[str, Any]]) -> list[VersionSpan]:
    """vLLM's `weight_versions` as `(start, end, version)` spans (a label that is not a number, such as vLLM's
    `"default"` before any update, is an unknown version)."""
    spans = []
    for span in raw:
        label = span.get("version")
        version = int(label) if isinstance(label, str) and label.lstrip("-").isdigit() else None
        spans.append((int(span["start"]), int(span["end"]), version))
    return spans


def check_spans(spans: list[VersionSpan], length: int, url: str) -> None:
    """Raise `ProtocolError` unless `spans` cover the output's `length` tokens in order, each token once (a gap or
    an overlap would drop or repeat tokens when the output is split into one segment per version)."""
    at = 0
    for start, end, _ in spans:
        if start != at or end < start:
            break
        at = end
    else:
        if at == length:
            return
    raise ProtocolError(f"vLLM at {url} labelled {length} output tokens with weight-version spans {spans}")


def is_disabled(status: int, message: str) -> bool:
    """Whether an error answer means the route is off: vLLM started without `--enable-scale-out` (403), or one
    without the route (404, 405; not a 404 about the model, which is the request's own fault)."""
    return status == 403 or (status in (404, 405) and "model" not in message.lower())
