"""OpenAI chat messages as the gateway reads and writes them.

Agents re-send their history in their own serialization (the SDK's `model_dump`, litellm's dicts, a CLI's JSON):
fields in another order, `content: null` beside `tool_calls`, arguments re-encoded, extra `refusal`/`audio`
keys. `message_key` reduces a message to what it means, so that the gateway can tell whether a new request only
appends to the conversation it has recorded. The tokens of earlier turns never come from these copies.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from agentrl.tools.base import ToolCall
from agentrl.types import Message

MessageKey = tuple[str, str, tuple[tuple[str, str], ...], str]


class MessageError(ValueError):
    """A request message the gateway cannot read (the reply is a 400 that quotes this message)."""


def text_of(content: Any) -> str:
    """A message's text: a string as is, the text parts of a list of content parts joined, None as ''."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") not in ("text", "input_text"):
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise MessageError(f"content part of type {kind!r} is not supported (text parts only)")
            parts.append(str(part.get("text", "")))
        return "".join(parts)
    raise MessageError(f"message content must be a string or a list of text parts, got {type(content).__name__}")


def message_key(message: dict[str, Any]) -> MessageKey:
    """What a message means, for comparing two serializations of it (whitespace around content ignored)."""
    calls = tuple(_call_key(call) for call in message.get("tool_calls") or [])
    return (
        str(message.get("role", "")),
        text_of(message.get("content")).strip(),
        calls,
        str(message.get("tool_call_id") or ""),
    )


def _call_key(call: Any) -> tuple[str, str]:
    if not isinstance(call, dict):
        raise MessageError(f"a tool call must be an object, got {type(call).__name__}")
    function = call.get("function") or {}
    arguments = function.get("arguments", "")
    if isinstance(arguments, str):
        with contextlib.suppress(json.JSONDecodeError):
            arguments = json.loads(arguments) if arguments.strip() else {}
    return str(function.get("name", "")), json.dumps(arguments, sort_keys=True, ensure_ascii=False)


def to_message(message: dict[str, Any]) -> Message:
    """A request message as the chat template renders it (assistant tool calls kept for a rewritten history)."""
    role = message.get("role")
    if role not in ("system", "user", "assistant", "tool", "developer"):
        raise MessageError(f"unknown message role {role!r} (system, user, assistant or tool)")
    return Message(
        role="system" if role == "developer" else role,
        content=text_of(message.get("content")),
        name=message.get("name"),
        tool_call_id=message.get("tool_call_id"),
        tool_calls=message.get("tool_calls") or None,
    )


def assistant_message(content: str, calls: list[ToolCall]) -> dict[str, Any]:
    """The reply as OpenAI returns it: `content` (None when only tool calls), and `tool_calls`."""
    message: dict[str, Any] = {"role": "assistant", "content": content if content or not calls else None}
    if calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments, ensure_ascii=False)},
            }
            for call in calls
        ]
    return message
