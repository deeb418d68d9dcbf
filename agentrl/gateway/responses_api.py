"""OpenAI's Responses API (`POST /v1/responses`) at the gateway, read into a chat-completions call and answered as
a `response` object, so that a Responses client (the `openai` SDK's `responses`, Codex CLI) is served token-exactly
by the same session, recorder and budgets as a chat one.

A request is translated item by item: `instructions` become the first message; message items their role's
message (`developer` as system); `function_call` items the tool calls of the assistant message they follow (or of
a new one); `function_call_output` items tool messages; function `tools` the chat tools. With
`previous_response_id`, the conversation that response ended (its input and output, without its instructions, as
OpenAI keeps them) comes first. A reply comes back as a `message` item (its text) and one `function_call` item per
parsed call. `RESPONSES_FIELDS` lists every field with what the gateway does with it; anything else is refused with
a 400 naming the field, as is every malformed one.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from agentrl.gateway.recorder import Reply
from agentrl.gateway.validation import RequestError

RESPONSES_FIELDS: dict[str, str] = {
    "model": "with several policies, the policy of that name generates; any other name means the default policy",
    "input": "a string (one user message) or a list of message, `function_call` and `function_call_output` items",
    "instructions": "the first (system) message; not carried over by `previous_response_id`, as at OpenAI",
    "previous_response_id": "the conversation that response of this session ended comes first",
    "tools": "function tools (`name`, `description`, `parameters`); OpenAI's hosted tools are refused",
    "tool_choice": '`"auto"` and `"none"`; `"required"` and a named function are refused (constrained decoding)',
    "max_output_tokens": "lowers the run's reply budget (`rollout.max_tokens`), never raises it",
    "stream": "the Responses event stream as the policy generates",
    "temperature": "as chat completions' `temperature` (the run's own unless the session honours the agent's)",
    "top_p": "as chat completions' `top_p`",
    "parallel_tool_calls": "echoed; every call the reply holds is returned",
    "store": "ignored: every response of a session is kept for `previous_response_id` while the session lives",
    "metadata": "echoed, otherwise ignored",
    "user": "ignored (an end-user id)",
    "safety_identifier": "ignored (an end-user id for OpenAI's abuse checks)",
    "prompt_cache_key": "ignored (OpenAI's prompt-cache routing; the gateway reuses recorded tokens anyway)",
    "prompt_cache_retention": "ignored",
    "service_tier": "ignored (OpenAI's processing tier)",
    "reasoning": "ignored: the policy reasons or not as its chat template makes it, and no reasoning item is returned",
    "include": "ignored: nothing the gateway returns is optional",
    "text": '`{"format": {"type": "text"}}` (and `verbosity`, ignored); structured output formats are refused',
    "truncation": '`"disabled"` (the default); `"auto"` is refused: the session\'s token budget ends the episode',
    "stream_options": "ignored",
    "client_metadata": "ignored (a client's own tags: Codex's turn and session ids)",
}
"""Every top-level field of a Responses request the gateway reads; any other is refused."""

TEXT_PARTS = ("input_text", "output_text", "text")


@dataclass
class Conversations:
    """A session's responses, by id: the chat messages each one ended (for `previous_response_id`)."""

    ended: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def history(self, response_id: Any) -> list[dict[str, Any]]:
        if response_id is None:
            return []
        if response_id not in self.ended:
            raise RequestError(
                "previous_response_id",
                f"`previous_response_id` {response_id!r} is no response of this session (responses are kept per "
                "session; send the whole conversation as `input` instead)",
            )
        return list(self.ended[response_id])


def to_chat_request(body: Any, conversations: Conversations) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The chat-completions request a Responses request asks for, and the conversation it continues (without the
    instructions: what a later `previous_response_id` starts from, once the reply is appended).

    Raises:
        RequestError: the first field the gateway cannot read, named as OpenAI names it (`input[2].content`).
    """
    if not isinstance(body, dict):
        raise RequestError("", "the request body must be a JSON object (a Responses request)")
    if unknown := [key for key in body if key not in RESPONSES_FIELDS]:
        raise RequestError(unknown[0], f"`{unknown[0]}` is not a Responses field the gateway serves")
    _check_options(body)
    conversation = conversations.history(body.get("previous_response_id")) + _input(body.get("input"))
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise RequestError("instructions", "`instructions` must be a string")
    system = [{"role": "system", "content": instructions}] if instructions else []
    chat: dict[str, Any] = {"messages": system + conversation}
    for key in ("model", "temperature", "top_p"):
        if body.get(key) is not None:
            chat[key] = body[key]
    if body.get("max_output_tokens") is not None:
        chat["max_tokens"] = body["max_output_tokens"]
    if body.get("tools"):
        chat["tools"] = _tools(body["tools"])
        chat["tool_choice"] = _tool_choice(body.get("tool_choice", "auto"))
    return chat, conversation


def _check_options(body: dict[str, Any]) -> None:
    tokens = body.get("max_output_tokens")
    if tokens is not None and (not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 1):
        raise RequestError("max_output_tokens", f"`max_output_tokens` must be a positive integer, got {tokens!r}")
    if not isinstance(body.get("stream", False), bool):
        raise RequestError("stream", f"`stream` must be true or false, got {body['stream']!r}")
    text_format = (body.get("text") or {}).get("format") if isinstance(body.get("text"), dict) else body.get("text")
    if text_format is not None and (not isinstance(text_format, dict) or text_format.get("type") != "text"):
        raise RequestError("text.format", '`text.format` must be {"type": "text"}: structured output is refused')
    if body.get("truncation") not in (None, "disabled"):
        raise RequestError(
            "truncation", '`truncation` must be "disabled": the session\'s token budget ends the episode'
        )


def _input(items: Any) -> list[dict[str, Any]]:
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    if not isinstance(items, list) or not items:
        raise RequestError("input", "`input` must be a string or a non-empty list of items")
    out: list[dict[str, Any]] = []
    for index, item in enumerate(items):
        where = f"input[{index}]"
        kind = item.get("type", "message") if isinstance(item, dict) else None
        if kind == "message":
            out.append(_message(item, where))
        elif kind == "function_call":
            _add_call(out, item, where)
        elif kind == "function_call_output":
            out.append(_call_output(item, where))
        else:
            shown = kind if isinstance(item, dict) else type(item).__name__
            raise RequestError(
                f"{where}.type",
                f"`{where}.type` is {shown!r}: the gateway reads message, function_call and function_call_output "
                "items (its replies hold no other)",
            )
    return out


def _message(item: dict[str, Any], where: str) -> dict[str, Any]:
    role = item.get("role")
    if role not in ("user", "assistant", "system", "developer"):
        raise RequestError(
            f"{where}.role", f"`{where}.role` must be user, assistant, system or developer, got {role!r}"
        )
    return {
        "role": "system" if role == "developer" else role,
        "content": _text(item.get("content"), f"{where}.content"),
    }


def _text(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise RequestError(where, f"`{where}` must be a string or a list of text parts")
    parts = []
    for index, part in enumerate(content):
        place = f"{where}[{index}]"
        if not isinstance(part, dict) or part.get("type") not in TEXT_PARTS or not isinstance(part.get("text"), str):
            kind = part.get("type") if isinstance(part, dict) else type(part).__name__
            raise RequestError(place, f"`{place}` must be an input_text or output_text part, got {kind!r}")
        parts.append(part["text"])
    return "".join(parts)


def _add_call(out: list[dict[str, Any]], item: dict[str, Any], where: str) -> None:
    """A function call joins the assistant message it follows (its text, its other calls), or starts one."""
    for key in ("call_id", "name", "arguments"):
        if not isinstance(item.get(key), str):
            raise RequestError(f"{where}.{key}", f"`{where}.{key}` must be a string")
    try:
        arguments = json.loads(item["arguments"]) if item["arguments"].strip() else {}
    except json.JSONDecodeError:
        arguments = None
    if not isinstance(arguments, dict):
        raise RequestError(f"{where}.arguments", f"`{where}.arguments` must be a JSON object (as a string)")
    call = {
        "id": item["call_id"],
        "type": "function",
        "function": {"name": item["name"], "arguments": item["arguments"]},
    }
    if not out or out[-1]["role"] != "assistant":
        out.append({"role": "assistant", "content": None})
    out[-1].setdefault("tool_calls", []).append(call)
    if out[-1]["content"] == "":
        out[-1]["content"] = None


def _call_output(item: dict[str, Any], where: str) -> dict[str, Any]:
    if not isinstance(item.get("call_id"), str):
        raise RequestError(f"{where}.call_id", f"`{where}.call_id` must be the function call's call_id")
    return {"role": "tool", "tool_call_id": item["call_id"], "content": _text(item.get("output"), f"{where}.output")}


def _tools(tools: Any) -> list[dict[str, Any]]:
    if not isinstance(tools, list):
        raise RequestError("tools", "`tools` must be a list of tools")
    out = []
    for index, tool in enumerate(tools):
        where = f"tools[{index}]"
        kind = tool.get("type") if isinstance(tool, dict) else None
        if kind != "function":
            raise RequestError(f"{where}.type", f"`{where}.type` is {kind!r}: only function tools are served")
        if not isinstance(tool.get("name"), str):
            raise RequestError(f"{where}.name", f"`{where}.name` must be a string")
        function = {"name": tool["name"], "description": str(tool.get("description") or "")}
        function["parameters"] = tool.get("parameters") or {"type": "object", "properties": {}}
        out.append({"type": "function", "function": function})
    return out


def _tool_choice(choice: Any) -> str:
    if choice in ("auto", "none"):
        return str(choice)
    raise RequestError(
        "tool_choice",
        f"`tool_choice` {choice!r} forces a tool call, which would mean constrained decoding (training on tokens the "
        'policy did not sample freely): send "auto"',
    )


@dataclass
class ResponseDraft:
    """A response's fields known before it is generated: its id, its message item's id, what the request asked."""

    body: dict[str, Any]
    model: str
    id: str = field(default_factory=lambda: f"resp_{uuid.uuid4().hex}")
    message_id: str = field(default_factory=lambda: f"msg_{uuid.uuid4().hex}")
    created_at: int = field(default_factory=lambda: int(time.time()))

    def response(self, reply: Reply | None) -> dict[str, Any]:
        """The `response` object: in progress (no reply yet) or done."""
        body = self.body
        out: dict[str, Any] = {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": "in_progress",
            "model": self.model,
            "output": [],
            "instructions": body.get("instructions"),
            "previous_response_id": body.get("previous_response_id"),
            "tools": body.get("tools") or [],
            "tool_choice": body.get("tool_choice", "auto"),
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "temperature": body.get("temperature"),
            "top_p": body.get("top_p"),
            "max_output_tokens": body.get("max_output_tokens"),
            "metadata": body.get("metadata") or {},
            "text": {"format": {"type": "text"}},
            "truncation": "disabled",
            "error": None,
            "incomplete_details": None,
            "usage": None,
        }
        if reply is not None:
            cut = reply.finish_reason == "length"
            out["status"] = "incomplete" if cut else "completed"
            out["incomplete_details"] = {"reason": "max_output_tokens"} if cut else None
            out["output"] = self.output(reply)
            out["usage"] = usage(reply)
        return out

    def output(self, reply: Reply) -> list[dict[str, Any]]:
        """The reply's items: its text as a message item (when it has text or no call), then its calls."""
        calls = reply.message.get("tool_calls") or []
        text = reply.message.get("content") or ""
        items = [self.message_item(text, "completed")] if text or not calls else []
        return items + [function_call_item(call) for call in calls]

    def message_item(self, text: str | None, status: str) -> dict[str, Any]:
        content = [] if text is None else [{"type": "output_text", "text": text, "annotations": []}]
        return {"type": "message", "id": self.message_id, "status": status, "role": "assistant", "content": content}


def function_call_item(call: dict[str, Any]) -> dict[str, Any]:
    """A chat tool call as a `function_call` item (its `id` derived from the call's, so that it is stable)."""
    function = call["function"]
    return {"type": "function_call", "id": f"fc_{call['id']}", "call_id": call["id"], "name": function["name"],
            "arguments": function["arguments"], "status": "completed"}  # fmt: skip


def usage(reply: Reply) -> dict[str, Any]:
    """The Responses `usage` object."""
    return {
        "input_tokens": reply.prompt_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": reply.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
    }
