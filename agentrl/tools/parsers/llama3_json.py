"""The Llama 3.x JSON format: the whole message is the call, optionally after `<|python_tag|>`.

```
{"name": "get_weather", "parameters": {"city": "Paris"}}; {"name": "get_time", "parameters": {}}
```
"""

from __future__ import annotations

import json
from typing import Any

from agentrl.tools.base import ToolCall
from agentrl.tools.parsers.base import ParsedOutput, ToolCallParser, call_from_object, call_json, strip_code_fence

PYTHON_TAG = "<|python_tag|>"
EXAMPLE = '{"name": "<tool name>", "parameters": {<arguments as a JSON object>}}'


class Llama3JsonParser(ToolCallParser):
    """One or more JSON calls separated by `;` making up the message, as Llama 3.1-3.3 emit them.

    A message that starts with `{` (after an optional `<|python_tag|>`) is taken as tool calls, so invalid
    JSON or a missing "name" there is a parse error; any other message is plain content. Text after the last
    call is kept as content. `arguments` is accepted for `parameters`.
    """

    name = "llama3_json"

    def parse(self, text: str) -> ParsedOutput:
        """Split `text` into calls and parse errors, or return it as content when it holds no call."""
        body = text.strip()
        tagged = body.startswith(PYTHON_TAG)
        body = strip_code_fence(body.removeprefix(PYTHON_TAG).strip())
        if not body.startswith("{"):
            errors = [f"expected a JSON tool call after {PYTHON_TAG}, like {EXAMPLE}"] if tagged and body else []
            return ParsedOutput(content=body if not tagged else "", errors=errors)
        return self._parse_calls(body)

    def _parse_calls(self, body: str) -> ParsedOutput:
        out = ParsedOutput(content="")
        decoder = json.JSONDecoder()
        pos = 0
        while pos < len(body):
            try:
                value, end = decoder.raw_decode(body, pos)
            except json.JSONDecodeError as exc:
                where = f"line {exc.lineno} column {exc.colno}"
                out.errors.append(f"invalid JSON in tool call ({exc.msg} at {where}). Expected {EXAMPLE}")
                return out
            call = call_from_object(value, body[pos:end], len(out.calls))
            if isinstance(call, str):
                out.errors.append(f"malformed tool call: {call}. Expected {EXAMPLE}")
            else:
                out.calls.append(call)
            pos = _skip_space(body, end)
            if not body.startswith(";", pos):
                out.content = body[pos:].strip()
                return out
            pos = _skip_space(body, pos + 1)
        return out

    def format_calls(self, calls: list[ToolCall]) -> str:
        """The calls' JSON objects (`parameters` for the arguments), separated by `; `."""
        return "; ".join(call_json(call, "parameters") for call in calls)

    def content_length(self, partial: str) -> int:
        """All of it once it cannot be a call (it does not start with `{`, a code fence or the python tag)."""
        head = partial.lstrip()
        starts = ("{", "```", PYTHON_TAG)
        if not head or any(head.startswith(s) or s.startswith(head) for s in starts):
            return 0
        return len(partial)

    def format_instructions(self, schemas: list[dict[str, Any]]) -> str:
        """The tool instructions of Llama 3.2's chat template."""
        functions = "\n\n".join(json.dumps(s, indent=4, ensure_ascii=False) for s in schemas)
        return (
            "You have access to the following functions. To call a function, please respond with JSON for a "
            'function call. Respond in the format {"name": function name, "parameters": dictionary of argument '
            "name and its value}. Do not use variables. To call several functions, separate the JSON objects "
            f"with ';'.\n\n{functions}"
        )


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos
