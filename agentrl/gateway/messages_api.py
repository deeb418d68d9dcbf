"""Anthropic's Messages API (`POST /v1/messages`) at the gateway, read into a chat-completions call and answered
as a `message` object, so that an Anthropic client (the `anthropic` SDK, Claude Code) is served token-exactly by
the same session, recorder and budgets as an OpenAI one.

A request is translated field by field: `system` becomes the first message; a user message's `tool_result` blocks
become tool messages (in their order) and its text blocks a user message; an assistant message's `text` and
`tool_use` blocks become its content and tool calls; `tools` become function tools (`input_schema` as their
parameters); `stop_sequences` the stop strings. A reply's text and parsed tool calls come back as `text` and
`tool_use` blocks. `MESSAGES_FIELDS` lists every field with what the gateway does with it; anything else is refused
with a 400 naming the field, as is every malformed one.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from agentrl.gateway.recorder import Reply
from agentrl.gateway.validation import RequestError

MESSAGES_FIELDS: dict[str, str] = {
    "model": "with several policies, the policy of that name generates; any other name means the default policy",
    "max_tokens": "lowers the run's reply budget (`rollout.max_tokens`), never raises it",
    "messages": "user, assistant and system messages of `text`, `tool_use` and `tool_result` blocks (or a string), "
    "rendered with the policy's chat template; the recorded tokens are reused when they extend the conversation. "
    "A `tool_result` with `is_error: true` (a failed call: Claude Code sends them) becomes a tool message starting "
    "`Error: `, as agentrl's own tools write a failed call",
    "system": "a string or `text` blocks: the first message",
    "tools": "custom tools (`name`, `description`, `input_schema`); Anthropic's server tools are refused",
    "tool_choice": "`auto` and `none`; `any` and a named `tool` are refused (forcing a call is constrained decoding)",
    "stop_sequences": "strings that end the reply (`stop_reason: stop_sequence`, `stop_sequence` naming it); its text "
    "is what came before the sequence, as at Anthropic (the recorded tokens keep the ones that completed it)",
    "stream": "Anthropic's event stream as the policy generates",
    "temperature": "as chat completions' `temperature` (the run's own unless the session honours the agent's)",
    "top_p": "as chat completions' `top_p`",
    "top_k": "as chat completions' `top_k`",
    "metadata": "ignored (a user id for Anthropic's abuse checks)",
    "thinking": "ignored: the policy thinks or not as its chat template makes it, and no thinking block is returned",
    "service_tier": "ignored (Anthropic's processing tier)",
    "cache_control": "ignored (Anthropic's prompt cache; the gateway reuses recorded tokens anyway)",
    "context_management": "ignored (Anthropic's server-side clearing of old tool results; history stays the agent's)",
    "output_config": "`effort` ignored (the policy reasons as its chat template makes it); a `format` (structured "
    "output) is refused",
}
"""Every top-level field of a Messages request the gateway reads; any other is refused."""

ERROR_PREFIX = "Error: "
"""How a `tool_result` with `is_error: true` starts its tool message (unless its text already does)."""
STOP_REASONS = {"tool_calls": "tool_use", "length": "max_tokens", "stop": "end_turn"}
BLOCK_FIELDS = {"type", "text", "id", "name", "input", "tool_use_id", "content", "is_error", "cache_control",
                "citations", "caller"}  # fmt: skip


def to_chat_request(body: Any) -> dict[str, Any]:
    """The chat-completions request a Messages request asks for.

    Raises:
        RequestError: the first field the gateway cannot read, named as Anthropic names it (`messages.2.content`).
    """
    if not isinstance(body, dict):
        raise RequestError("", "the request body must be a JSON object (a Messages request)")
    if unknown := [key for key in body if key not in MESSAGES_FIELDS]:
        raise RequestError(unknown[0], f"`{unknown[0]}` is not a Messages field the gateway serves")
    output_config = body.get("output_config")
    if output_config is not None and (not isinstance(output_config, dict) or set(output_config) - {"effort"}):
        raise RequestError("output_config", "`output_config` may only set `effort`: structured output is refused")
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise RequestError("max_tokens", f"`max_tokens` is required: a positive integer, got {max_tokens!r}")
    chat: dict[str, Any] = {"max_tokens": max_tokens, "messages": _system(body.get("system"))}
    chat["messages"] += _messages(body.get("messages"))
    for key in ("model", "temperature", "top_p", "top_k"):
        if body.get(key) is not None:
            chat[key] = body[key]
    if body.get("stop_sequences") is not None:
        stop = body["stop_sequences"]
        if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop):
            raise RequestError("stop_sequences", "`stop_sequences` must be a list of non-empty strings")
        chat["stop"] = stop
    if not isinstance(body.get("stream", False), bool):
        raise RequestError("stream", f"`stream` must be true or false, got {body['stream']!r}")
    if body.get("tools"):
        chat["tools"] = _tools(body["tools"])
        chat["tool_choice"] = _tool_choice(body.get("tool_choice"))
    return chat


def _system(system: Any) -> list[dict[str, Any]]:
    if system is None or system == "" or system == []:
        return []
    return [{"role": "system", "content": _text(system, "system")}]


def _text(content: Any, where: str) -> str:
    """A string, or the text of a list of `text` blocks joined."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise RequestError(where, f"`{where}` must be a string or a list of text blocks")
    parts = []
    for index, block in enumerate(content):
        place = f"{where}.{index}"
        if not isinstance(block, dict) or block.get("type") != "text" or not isinstance(block.get("text"), str):
            kind = block.get("type") if isinstance(block, dict) else type(block).__name__
            raise RequestError(place, f'`{place}` must be a text block {{"type": "text", "text": ...}}, got {kind!r}')
        parts.append(block["text"])
    return "\n\n".join(parts)


def _messages(messages: Any) -> list[dict[str, Any]]:
    if not isinstance(messages, list) or not messages:
        raise RequestError("messages", "`messages` must be a non-empty list of user and assistant messages")
    out: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        where = f"messages.{index}"
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant", "system"):
            role = message.get("role") if isinstance(message, dict) else None
            raise RequestError(f"{where}.role", f"`{where}.role` must be user, assistant or system, got {role!r}")
        content = message.get("content")
        if message["role"] == "system":  # a system message within the conversation (Claude Code's environment)
            out.append({"role": "system", "content": _text(content, f"{where}.content")})
        elif isinstance(content, str):
            out.append({"role": message["role"], "content": content})
        elif isinstance(content, list):
            reader = _assistant if message["role"] == "assistant" else _user
            out += reader(content, f"{where}.content")
        else:
            raise RequestError(f"{where}.content", f"`{where}.content` must be a string or a list of blocks")
    return out


def _user(blocks: list[Any], where: str) -> list[dict[str, Any]]:
    """Tool results as tool messages, text as a user message, in the order the blocks come."""
    out: list[dict[str, Any]] = []
    for index, block in enumerate(blocks):
        place = f"{where}.{index}"
        kind = _block_type(block, place)
        if kind == "tool_result":
            if not isinstance(block.get("tool_use_id"), str):
                raise RequestError(f"{place}.tool_use_id", f"`{place}.tool_use_id` must be the tool_use block's id")
            content = block.get("content", "")
            text = _text(content, f"{place}.content") if content != [] else ""
            text = _failed(text) if _is_error(block, place) else text
            out.append({"role": "tool", "tool_call_id": block["tool_use_id"], "content": text})
        elif kind == "text":
            if out and out[-1]["role"] == "user":
                out[-1]["content"] += "\n\n" + block["text"]
            else:
                out.append({"role": "user", "content": block["text"]})
        else:
            raise RequestError(place, f"`{place}` is a {kind!r} block: user messages take text and tool_result blocks")
    if not out:
        raise RequestError(where, f"`{where}` must hold at least one block")
    return out


def _is_error(block: dict[str, Any], where: str) -> bool:
    """A `tool_result`'s `is_error` (false when absent)."""
    flag = block.get("is_error", False)
    if not isinstance(flag, bool):
        raise RequestError(f"{where}.is_error", f"`{where}.is_error` must be true or false, got {flag!r}")
    return flag


def _failed(text: str) -> str:
    """A failed call's result as agentrl's own tools write one (`Error: ...`), so the policy reads it as a failure."""
    return text if text.startswith(ERROR_PREFIX) else f"{ERROR_PREFIX}{text}".rstrip()


def _assistant(blocks: list[Any], where: str) -> list[dict[str, Any]]:
    text, calls = [], []
    for index, block in enumerate(blocks):
        place = f"{where}.{index}"
        kind = _block_type(block, place)
        if kind == "text":
            text.append(block["text"])
        elif kind == "tool_use":
            if not isinstance(block.get("id"), str) or not isinstance(block.get("name"), str):
                raise RequestError(place, f"`{place}` must have the tool_use block's `id` and `name`")
            if not isinstance(block.get("input"), dict):
                raise RequestError(f"{place}.input", f"`{place}.input` must be an object")
            arguments = json.dumps(block["input"], ensure_ascii=False)
            calls.append(
                {"id": block["id"], "type": "function", "function": {"name": block["name"], "arguments": arguments}}
            )
        else:
            raise RequestError(place, f"`{place}` is a {kind!r} block: the gateway's replies hold text and tool_use")
    message: dict[str, Any] = {"role": "assistant", "content": "".join(text) or (None if calls else "")}
    if calls:
        message["tool_calls"] = calls
    return [message]


def _block_type(block: Any, where: str) -> str:
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        raise RequestError(where, f"`{where}` must be a content block with a `type`")
    kind = block["type"]
    if kind == "text" and not isinstance(block.get("text"), str):
        raise RequestError(f"{where}.text", f"`{where}.text` must be a string")
    if kind in ("image", "document"):
        raise RequestError(where, f"`{where}` is {kind!r}: the policy reads text only")
    return kind


def _tools(tools: Any) -> list[dict[str, Any]]:
    if not isinstance(tools, list):
        raise RequestError("tools", "`tools` must be a list of tools")
    out = []
    for index, tool in enumerate(tools):
        where = f"tools.{index}"
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            raise RequestError(where, f"`{where}` must be a tool with a `name` and an `input_schema`")
        if tool.get("type") not in (None, "custom"):
            raise RequestError(
                f"{where}.type", f"`{where}` is Anthropic's server tool {tool['type']!r}: only custom tools are served"
            )
        schema = tool.get("input_schema")
        if not isinstance(schema, dict):
            raise RequestError(f"{where}.input_schema", f"`{where}.input_schema` must be a JSON schema object")
        function = {"name": tool["name"], "description": str(tool.get("description") or ""), "parameters": schema}
        out.append({"type": "function", "function": function})
    return out


def _tool_choice(choice: Any) -> str:
    kind = choice.get("type") if isinstance(choice, dict) else None
    if choice is None or kind == "auto":
        return "auto"
    if kind == "none":
        return "none"
    if kind in ("any", "tool"):
        raise RequestError(
            "tool_choice",
            f"`tool_choice` {kind!r} forces a tool call, which would mean constrained decoding (training on tokens "
            'the policy did not sample freely): send {"type": "auto"}',
        )
    raise RequestError("tool_choice", f'`tool_choice` must be {{"type": "auto"}} or {{"type": "none"}}, got {choice!r}')


def message_head(model: str) -> dict[str, Any]:
    """A `message` object's fields known before its reply (a stream's `message_start` sends them)."""
    return {"id": f"msg_{uuid.uuid4().hex}", "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": None, "stop_sequence": None}  # fmt: skip


def message_body(reply: Reply, model: str) -> dict[str, Any]:
    """The reply as a Messages `message` object."""
    reason, sequence = stop_reason(reply)
    return {
        **message_head(model),
        "content": content_blocks(reply),
        "stop_reason": reason,
        "stop_sequence": sequence,
        "usage": {"input_tokens": reply.prompt_tokens, "output_tokens": reply.completion_tokens},
    }


def content_blocks(reply: Reply) -> list[dict[str, Any]]:
    """The reply's text (when it has any) and tool calls as content blocks."""
    text = reply.message.get("content") or ""
    blocks: list[dict[str, Any]] = (
        [{"type": "text", "text": text}] if text or not reply.message.get("tool_calls") else []
    )
    for call in reply.message.get("tool_calls") or []:
        function = call["function"]
        blocks.append(
            {"type": "tool_use", "id": call["id"], "name": function["name"], "input": json.loads(function["arguments"])}
        )
    return blocks


def stop_reason(reply: Reply) -> tuple[str, str | None]:
    """Anthropic's stop reason, and the stop sequence that ended the reply (its text is what came before it)."""
    reason = STOP_REASONS.get(reply.finish_reason, "end_turn")
    if reason == "end_turn" and reply.stop_sequence is not None:
        return "stop_sequence", reply.stop_sequence
    return reason, None


def model_entry(name: str) -> dict[str, Any]:
    """A model in both listings' shapes: Anthropic's (`type`, `display_name`, `created_at`) and OpenAI's."""
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(0))
    return {"id": name, "object": "model", "created": 0, "owned_by": "agentrl", "type": "model",
            "display_name": name, "created_at": created}  # fmt: skip


def anthropic_error(status: int, message: str) -> dict[str, Any]:
    """An Anthropic error object for an HTTP status."""
    kinds = {400: "invalid_request_error", 404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error"}
    return {"type": "error", "error": {"type": kinds.get(status, "api_error"), "message": message}}
