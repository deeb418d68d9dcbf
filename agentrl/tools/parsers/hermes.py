"""The Hermes format (Qwen2.5/Qwen3, Hermes, many others): JSON calls inside `<tool_call>` tags.

```
Let me check.
<tool_call>
{"name": "get_weather", "arguments": {"city": "Paris"}}
</tool_call>
```
"""

from __future__ import annotations

from typing import Any

from agentrl.tools.base import ToolCall
from agentrl.tools.parsers.base import (
    ParsedOutput,
    ToolCallParser,
    call_from_object,
    call_json,
    decode_json,
    tools_json_lines,
)

OPEN, CLOSE = "<tool_call>", "</tool_call>"
EXAMPLE = '<tool_call>\n{"name": "<tool name>", "arguments": {<arguments as a JSON object>}}\n</tool_call>'


class HermesParser(ToolCallParser):
    """Any number of `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks per message.

    Tolerates `parameters` for `arguments`, arguments given as a JSON string, and a Markdown code fence
    inside the tags. A block without its closing tag is a parse error.
    """

    name = "hermes"

    def parse(self, text: str) -> ParsedOutput:
        """Split `text` into the text around the blocks, the calls, and one error per malformed block."""
        out = ParsedOutput(content="")
        pieces: list[str] = []
        pos = 0
        while (start := text.find(OPEN, pos)) != -1:
            pieces.append(text[pos:start])
            end = text.find(CLOSE, start + len(OPEN))
            if end == -1:
                out.errors.append(f"unterminated {OPEN} block: close every call with {CLOSE}, as in\n{EXAMPLE}")
                pos = len(text)
                break
            pos = end + len(CLOSE)
            self._add_call(out, text[start + len(OPEN) : end], text[start:pos])
        pieces.append(text[pos:])
        out.content = "\n".join(p.strip() for p in pieces if p.strip())
        return out

    def _add_call(self, out: ParsedOutput, body: str, raw: str) -> None:
        value, error = decode_json(body)
        if error is None:
            call = call_from_object(value, raw, len(out.calls))
            if isinstance(call, str):
                error = call
            else:
                out.calls.append(call)
                return
        out.errors.append(f"malformed {OPEN} block: {error}. Expected\n{EXAMPLE}")

    def format_calls(self, calls: list[ToolCall]) -> str:
        """One `<tool_call>` block per call, as Qwen2.5's chat template writes them."""
        return "\n".join(f"{OPEN}\n{call_json(call)}\n{CLOSE}" for call in calls)

    def content_length(self, partial: str) -> int:
        """Up to the first `<tool_call>`, less a tail that may be the start of one."""
        start = partial.find(OPEN)
        if start != -1:
            return start
        for keep in range(len(OPEN) - 1, 0, -1):
            if partial.endswith(OPEN[:keep]):
                return len(partial) - keep
        return len(partial)

    def format_instructions(self, schemas: list[dict[str, Any]]) -> str:
        """The tools section Qwen2.5's chat template writes into the system prompt."""
        return (
            "# Tools\n\n"
            "You may call one or more functions to assist with the user query.\n\n"
            "You are provided with function signatures within <tools></tools> XML tags:\n"
            f"<tools>\n{tools_json_lines(schemas)}\n</tools>\n\n"
            "For each function call, return a json object with function name and arguments within "
            "<tool_call></tool_call> XML tags:\n"
            '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
        )
