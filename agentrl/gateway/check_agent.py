"""The agent `check_loop` runs behind the gateway (`OpenAIAgentLoop.check_case`): two chat turns through the
`openai` SDK, re-sending the history as agents do."""

from __future__ import annotations

from typing import Any

from agentrl.types import Sample


async def two_turns(base_url: str, model: str, sample: Sample, sandbox: Any) -> str:
    """Ask, then ask again with the first answer in the history; returns the last answer."""
    import openai

    client = openai.AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=0)
    messages: list[dict[str, Any]] = [m.to_openai() for m in sample.prompt]
    for follow_up in ("Once more.", None):
        reply = await client.chat.completions.create(model=model, messages=messages)  # type: ignore[arg-type]
        messages.append({"role": "assistant", "content": reply.choices[0].message.content or ""})
        if follow_up:
            messages.append({"role": "user", "content": follow_up})
    return str(messages[-1]["content"])
