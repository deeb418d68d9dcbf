"""Checking a chat-completions request body before anything is rendered or generated.

Every malformed field is refused with a 400 that names it (`param`, as OpenAI does) and says what it must be, so
that an agent's bug is reported at the gateway rather than as a rollout server's failure.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from agentrl.gateway.request_fields import forced_tool_choice, unapplied_field

ROLES = ("system", "developer", "user", "assistant", "tool")
TEXT_PARTS = ("text", "input_text")
IMAGE_PARTS = ("image_url", "input_image", "image")
TOOL_CHOICES = ("none", "auto", "required")


class RequestError(ValueError):
    """A request field the gateway cannot accept (the agent gets a 400 naming `param`)."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(message)
        self.param = param


def read_request(body: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    """The request's messages and tools, once every field the gateway reads is well-formed and no field asks for
    what the gateway does not apply (`agentrl.gateway.request_fields`).

    Raises:
        RequestError: the first malformed field, named.
    """
    if not isinstance(body, dict):
        raise RequestError("", "the request body must be a JSON object (a chat-completions request)")
    if body.get("n", 1) != 1:
        raise RequestError("n", "the gateway returns one choice per call: n must be 1")
    _check_sampling(body)
    _check_tools(body)
    if problem := unapplied_field(body):
        raise RequestError(*problem)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise RequestError("messages", "`messages` must be a non-empty list of message objects")
    for index, message in enumerate(messages):
        check_message(message, f"messages[{index}]")
    return messages, body.get("tools")


def check_message(message: dict[str, Any], where: str) -> None:
    """Raise `RequestError` for a message field of the wrong type or value (`where` names the message)."""
    role = message.get("role")
    if role not in ROLES:
        raise RequestError(f"{where}.role", f"`{where}.role` must be one of {', '.join(ROLES)}, got {role!r}")
    content = message.get("content")
    if content is None and role != "assistant":
        raise RequestError(f"{where}.content", f"`{where}.content` is missing: {role} messages need text")
    if isinstance(content, list):
        for index, part in enumerate(content):
            _check_part(part, f"{where}.content[{index}]")
    elif content is not None and not isinstance(content, str):
        raise RequestError(
            f"{where}.content", f"`{where}.content` must be a string or a list of text parts, got {_kind(content)}"
        )
    for key in ("name", "tool_call_id"):
        if message.get(key) is not None and not isinstance(message[key], str):
            raise RequestError(f"{where}.{key}", f"`{where}.{key}` must be a string, got {_kind(message[key])}")
    calls = message.get("tool_calls")
    if calls is not None:
        if role != "assistant" or not isinstance(calls, list):
            raise RequestError(f"{where}.tool_calls", f"`{where}.tool_calls` must be a list, on assistant messages")
        for index, call in enumerate(calls):
            _check_call(call, f"{where}.tool_calls[{index}]")


def _check_part(part: Any, where: str) -> None:
    kind = part.get("type") if isinstance(part, dict) else None
    if kind in IMAGE_PARTS:
        raise RequestError(where, f"image inputs are not supported (`{where}` is {kind!r}): the policy reads text only")
    if kind not in TEXT_PARTS or not isinstance(part.get("text"), str):
        got = repr(kind) if isinstance(part, dict) else _kind(part)
        raise RequestError(where, f'`{where}` must be a text part {{"type": "text", "text": "..."}}, got {got}')


def _check_call(call: Any, where: str) -> None:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str) or not function["name"]:
        shape = '{"type": "function", "function": {"name": ..., "arguments": ...}}'
        raise RequestError(where, f"`{where}` must be {shape}")
    if not isinstance(call_arguments(function), dict):
        raise RequestError(
            f"{where}.function.arguments", f"`{where}.function.arguments` must be a JSON object (as a string)"
        )


def call_arguments(function: dict[str, Any]) -> Any:
    """A tool call's arguments, decoded from the JSON string OpenAI sends (an object passes as is; None if the
    string is not JSON)."""
    arguments = function.get("arguments")
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        return {}
    if not isinstance(arguments, str):
        return arguments
    try:
        return json.loads(arguments)
    except json.JSONDecodeError:
        return None


def _check_sampling(body: dict[str, Any]) -> None:
    _check_number(body, "temperature", 0.0, 2.0, low_open=False)
    _check_number(body, "top_p", 0.0, 1.0, low_open=True)
    for key in ("max_tokens", "max_completion_tokens"):
        value = body.get(key)
        if value is not None and (not _is_int(value) or value < 1):
            raise RequestError(key, f"`{key}` must be a positive integer, got {value!r}")
    top_k = body.get("top_k")
    if top_k is not None and (not _is_int(top_k) or top_k < -1):
        raise RequestError("top_k", f"`top_k` must be an integer, -1 (off) or more, got {top_k!r}")
    if body.get("seed") is not None and not _is_int(body["seed"]):
        raise RequestError("seed", f"`seed` must be an integer, got {body['seed']!r}")
    stop = body.get("stop")
    if stop is not None and not isinstance(stop, str) and not _is_str_list(stop):
        raise RequestError("stop", f"`stop` must be a string or a list of strings, got {stop!r}")
    if not isinstance(body.get("stream", False), bool):
        raise RequestError("stream", f"`stream` must be true or false, got {body['stream']!r}")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise RequestError("stream_options", '`stream_options` must be an object like {"include_usage": true}')


def _check_tools(body: dict[str, Any]) -> None:
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            raise RequestError("tools", f"`tools` must be a list of tool objects, got {_kind(tools)}")
        for index, tool in enumerate(tools):
            function = tool.get("function") if isinstance(tool, dict) else None
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                where = f"tools[{index}]"
                raise RequestError(where, f'`{where}` must be {{"type": "function", "function": {{"name": ...}}}}')
    choice = body.get("tool_choice")
    named = isinstance(choice, dict) and isinstance((choice.get("function") or {}).get("name"), str)
    if choice is not None and choice not in TOOL_CHOICES and not named:
        raise RequestError(
            "tool_choice",
            f'`tool_choice` must be "none", "auto", "required" or {{"type": "function", "function": {{"name": ...}}}}, '
            f"got {choice!r}",
        )
    if forced := forced_tool_choice(choice):
        raise RequestError("tool_choice", forced)


def _check_number(body: dict[str, Any], key: str, low: float, high: float, low_open: bool) -> None:
    value = body.get(key)
    if value is None:
        return
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if ok and (value > high or value < low or (low_open and value == low)):
        ok = False
    if not ok:
        bounds = f"{'above' if low_open else 'from'} {low:g} {'up ' if low_open else ''}to {high:g}"
        raise RequestError(key, f"`{key}` must be a number {bounds}, got {value!r}")


def _is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(s, str) for s in value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


async def read_json(request: web.Request) -> Any:
    """The request's JSON body.

    Raises:
        RequestError: the body is not UTF-8 JSON (the answer is a 400 in the route's API's shape).
    """
    raw = await request.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RequestError("", f"the request body is not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise RequestError("", f"the request body is not JSON: {exc}") from exc
