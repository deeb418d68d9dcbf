"""Rendering conversations with a tokenizer's chat template, as text (tokenized by the caller)."""

from __future__ import annotations

from typing import Any

from agentrl.types import Message


def template_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Messages as the chat template should see them.

    Assistant turns the model generated are rendered from their raw generated text (`content`), never from parsed
    tool calls: the template must reproduce what the model wrote, not a re-serialization of it (so they are
    recorded without `tool_calls`). An assistant message that does carry `tool_calls` is one the model did not
    generate (an agent's few-shot example, a resumed history): its calls go to the template, which writes them in
    its own format (as `ToolCall.to_dict` gives them, arguments as objects).
    """
    out = []
    for m in messages:
        d: dict[str, Any] = {"role": m.role, "content": m.content if m.content is not None else ""}
        if m.role == "assistant" and m.tool_calls:
            d["tool_calls"] = m.tool_calls
        if m.role == "tool" and m.tool_call_id:
            d["tool_call_id"] = m.tool_call_id
        if m.name and m.role == "tool":
            d["name"] = m.name
        out.append(d)
    return out


def render(
    tokenizer: Any,
    messages: list[Message],
    *,
    add_generation_prompt: bool,
    tools: list[dict[str, Any]] | None = None,
) -> str:
    """The conversation as the chat template renders it."""
    kwargs: dict[str, Any] = {"tokenize": False, "add_generation_prompt": add_generation_prompt}
    if tools:
        kwargs["tools"] = tools
    text = tokenizer.apply_chat_template(template_messages(messages), **kwargs)
    if not isinstance(text, str):
        raise TypeError(f"chat template returned {type(text).__name__}, expected text")
    return text


def encode(tokenizer: Any, text: str) -> list[int]:
    """Tokenize template output; the template already placed every special token it wants."""
    return list(tokenizer.encode(text, add_special_tokens=False))
