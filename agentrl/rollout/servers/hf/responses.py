"""OpenAI/vLLM-shaped response bodies built from a `GenerationOutput`."""

from __future__ import annotations

import time
from typing import Any

from agentrl.rollout.protocol import CompletionChoice, CompletionLogprobs, CompletionResponse, Usage
from agentrl.rollout.servers.hf.request import GenerationOutput
from agentrl.rollout.servers.hf.schemas import ChatCompletionRequest, HFCompletionRequest


def token_strings(tokenizer: Any, token_ids: list[int]) -> list[str]:
    """Each token decoded on its own (the `tokens` of OpenAI logprobs)."""
    if not token_ids:
        return []
    return list(tokenizer.batch_decode([[t] for t in token_ids]))


def _usage(out: GenerationOutput) -> Usage:
    prompt, completion = len(out.prompt_token_ids), len(out.token_ids)
    return Usage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion)


def completion_response(out: GenerationOutput, req: HFCompletionRequest, model: str, tokenizer: Any) -> dict[str, Any]:
    """The `/v1/completions` body: text, optional token ids and logprobs, usage and `policy_version`."""
    choice = CompletionChoice(
        text=out.text or "",
        finish_reason=out.finish_reason,
        stop_reason=out.stop_reason,
        token_ids=out.token_ids if req.return_token_ids else None,
        prompt_token_ids=out.prompt_token_ids if req.return_token_ids else None,
        logprobs=_completion_logprobs(out, tokenizer) if req.logprobs is not None else None,
    )
    body = CompletionResponse(
        id=f"cmpl-{out.request_id}",
        created=int(time.time()),
        model=model,
        choices=[choice],
        usage=_usage(out),
        policy_version=out.policy_version,
    )
    return body.model_dump()


def _completion_logprobs(out: GenerationOutput, tokenizer: Any) -> CompletionLogprobs:
    tokens = token_strings(tokenizer, out.token_ids)
    offsets, pos = [], 0
    for tok in tokens:
        offsets.append(pos)
        pos += len(tok)
    top = None
    if out.top_logprobs is not None:
        top = [_top_dict(tokenizer, alts) for alts in out.top_logprobs]
    return CompletionLogprobs(tokens=tokens, token_logprobs=out.logprobs, top_logprobs=top, text_offset=offsets)


def _top_dict(tokenizer: Any, alts: list[tuple[int, float]]) -> dict[str, float]:
    names = token_strings(tokenizer, [t for t, _ in alts])
    return {name: lp for name, (_, lp) in zip(names, alts, strict=True)}


def chat_response(out: GenerationOutput, req: ChatCompletionRequest, model: str, tokenizer: Any) -> dict[str, Any]:
    """The `/v1/chat/completions` body (OpenAI shape) plus vLLM's `token_ids` / `prompt_token_ids`."""
    choice: dict[str, Any] = {
        "index": 0,
        "message": {"role": "assistant", "content": out.text or ""},
        "logprobs": {"content": _chat_logprobs(out, tokenizer)} if req.logprobs else None,
        "finish_reason": out.finish_reason,
        "stop_reason": out.stop_reason,
    }
    if req.return_token_ids:
        choice["token_ids"] = out.token_ids
        choice["prompt_token_ids"] = out.prompt_token_ids
    return {
        "id": f"chatcmpl-{out.request_id}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": _usage(out).model_dump(),
        "prompt_token_ids": out.prompt_token_ids if req.return_token_ids else None,
        "policy_version": out.policy_version,
    }


def _chat_logprobs(out: GenerationOutput, tokenizer: Any) -> list[dict[str, Any]]:
    tokens = token_strings(tokenizer, out.token_ids)
    content = []
    for i, (tok, lp) in enumerate(zip(tokens, out.logprobs, strict=True)):
        alts = out.top_logprobs[i] if out.top_logprobs is not None else []
        names = token_strings(tokenizer, [t for t, _ in alts])
        content.append(
            {
                "token": tok,
                "logprob": lp,
                "bytes": list(tok.encode()),
                "top_logprobs": [
                    {"token": n, "logprob": a_lp, "bytes": list(n.encode())}
                    for n, (_, a_lp) in zip(names, alts, strict=True)
                ],
            }
        )
    return content
