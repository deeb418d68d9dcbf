"""The tool-call parser contract, and helpers shared by the JSON-based formats."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from agentrl.tools.base import ToolCall


@dataclass
class ParsedOutput:
    """A model message split into its text and its tool calls.

    Attributes:
        content: the text outside the tool calls, stripped.
        calls: the well-formed calls, in order.
        errors: one message per malformed call, written for the model to fix its next attempt.
    """

    content: str
    calls: list[ToolCall] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class ToolCallParser(ABC):
    """Reads tool calls out of generated text in one model family's format, and describes that format."""

    name: str = ""

    @abstractmethod
    def parse(self, text: str) -> ParsedOutput:
        """Split generated `text` into content, calls and parse errors; never raises on malformed calls."""

    @abstractmethod
    def format_instructions(self, schemas: list[dict[str, Any]]) -> str:
        """System-prompt text listing the tools (`schemas` in OpenAI format) and the exact call format.

        Used when the chat template has no tools slot of its own.
        """

    def format_calls(self, calls: list[ToolCall]) -> str:
        """The calls as this format writes them: the text a model trained on it emits, which `parse` reads back.

        Used to render tool calls the model did not generate itself (an agent's few-shot example, a resumed
        history) when the chat template has no tool-call format of its own. Default: one JSON object per line.
        """
        return "\n".join(call_json(call) for call in calls)

    def content_length(self, partial: str) -> int:
        """How much of a generation still being streamed is surely content, not the start of a tool call.

        The gateway streams that much of a reply to an agent that offered tools before the reply is parsed.
        Default: nothing (the whole reply waits for the parse).
        """
        return 0


def call_json(call: ToolCall, arguments_key: str = "arguments") -> str:
    """One call as the JSON object the JSON-based formats write."""
    return json.dumps({"name": call.name, arguments_key: call.arguments}, ensure_ascii=False)


def call_from_object(obj: Any, raw: str, index: int) -> ToolCall | str:
    """A `ToolCall` from a decoded JSON object, or a message saying what is wrong with it.

    Accepts `arguments` or `parameters`, given as an object or as a JSON string of one; an `id` is kept,
    else `call_<index>` is used.

    Args:
        obj: the decoded JSON value.
        raw: the call's exact text in the output.
        index: position of the call in the message, for the generated id.
    """
    if not isinstance(obj, dict):
        return f"a tool call must be a JSON object, got {_json_repr(obj)}"
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        return 'missing "name" (the tool to call, as a string)'
    arguments = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(arguments, str):
        arguments = _decode_string_arguments(arguments)
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return f'the arguments of "{name}" must be a JSON object, got {_json_repr(arguments)}'
    call_id = obj.get("id")
    call_id = call_id if isinstance(call_id, str) and call_id else f"call_{index}"
    return ToolCall(id=call_id, name=name, arguments=arguments, raw=raw)


def _decode_string_arguments(text: str) -> Any:
    if not text.strip():
        return {}
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text  # reported as "must be a JSON object"


def _json_repr(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def decode_json(text: str) -> tuple[Any, str | None]:
    """Decode one JSON value that must fill `text` (up to surrounding whitespace and code fences).

    Returns:
        The value and None, or None and a message with the JSON error and where it occurred.
    """
    body = strip_code_fence(text.strip())
    try:
        value, end = json.JSONDecoder().raw_decode(body)
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
    if body[end:].strip():
        return None, f"unexpected text after the JSON object: {body[end:].strip()[:40]!r}"
    return value, None


def strip_code_fence(text: str) -> str:
    """Remove a Markdown code fence (```json ... ```) around `text`, which small models often add."""
    if text.startswith("```") and text.endswith("```") and len(text) >= 6:
        inner = text[3:-3]
        first_line, _, rest = inner.partition("\n")
        return (rest if first_line.strip().isalpha() or not first_line.strip() else inner).strip()
    return text


def tools_json_lines(schemas: list[dict[str, Any]]) -> str:
    """The tool schemas, one compact JSON object per line."""
    return "\n".join(json.dumps(s, ensure_ascii=False) for s in schemas)
