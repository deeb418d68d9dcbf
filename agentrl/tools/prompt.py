"""Putting the tool schemas into the prompt: through the chat template's tools slot, or a system-prompt fallback.

Templates of tool-trained models (Qwen2.5, Llama 3.1+, Hermes...) take `tools=` in `apply_chat_template` and
render the schemas in their own words. Others, like SmolLM2-135M-Instruct's, have no tools slot: the template
drops `tools=` silently. For those, the parser's `format_instructions` (the tool list plus the exact call
format it parses) goes into the system message instead.
"""

from __future__ import annotations

import re
from typing import Any

from agentrl.tools.parsers import ToolCallParser, get_parser
from agentrl.types import Message

_TOOLS_VARIABLE = re.compile(r"\btools\b")
_TOOL_CALLS_VARIABLE = re.compile(r"\btool_calls\b")


def template_has_tools_slot(tokenizer: Any) -> bool:
    """Whether the tokenizer's chat template renders a `tools` variable.

    A template given as a dict of named templates (older HF tokenizers) counts when its `tool_use` entry,
    or any entry, mentions `tools`.
    """
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, dict):
        sources = [template["tool_use"]] if "tool_use" in template else list(template.values())
    else:
        sources = [template]
    return any(isinstance(s, str) and _TOOLS_VARIABLE.search(s) for s in sources)


def template_renders_tool_calls(tokenizer: Any) -> bool:
    """Whether the tokenizer's chat template writes assistant messages' `tool_calls` (its own call format)."""
    template = getattr(tokenizer, "chat_template", None)
    sources = list(template.values()) if isinstance(template, dict) else [template]
    return any(isinstance(s, str) and _TOOL_CALLS_VARIABLE.search(s) for s in sources)


def tools_system_prompt(tokenizer: Any, schemas: list[dict[str, Any]], parser: ToolCallParser | str) -> str | None:
    """The system-prompt text describing the tools, or None when the chat template renders them itself.

    When the template has a tools slot (its source mentions `tools`), returns None: pass
    `tools=schemas` to `tokenizer.apply_chat_template` and let the template describe them in the format the
    model was trained on. Otherwise (the fallback, e.g. SmolLM2, whose template has no tools slot) returns
    `parser.format_instructions(schemas)`, to merge into the system message with `add_tool_instructions`;
    the model is then told the exact format `parser` reads. Returns None as well when there are no tools.

    Args:
        tokenizer: a Hugging Face tokenizer (anything with a `chat_template` attribute).
        schemas: the tools in OpenAI function-tool format (`ToolSet.schemas()`).
        parser: the parser that will read the model's calls, or its registered name.
    """
    if not schemas or template_has_tools_slot(tokenizer):
        return None
    return get_parser(parser).format_instructions(schemas)


def add_tool_instructions(messages: list[Message], text: str) -> list[Message]:
    """A copy of `messages` with `text` appended to the system message, or put in a new first one.

    The input list and its messages are left unchanged.
    """
    if messages and messages[0].role == "system":
        first = messages[0]
        return [first.model_copy(update={"content": _merge(first.content, text)}), *messages[1:]]
    return [Message(role="system", content=text), *messages]


def _merge(content: str | list[dict[str, Any]] | None, text: str) -> str | list[dict[str, Any]]:
    if isinstance(content, list):
        return [*content, {"type": "text", "text": text}]
    return f"{content}\n\n{text}" if content else text
