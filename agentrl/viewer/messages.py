"""Messages as the viewer shows them: text, tool calls and images as a flat list of typed parts.

Part shapes (plain dicts, inlined in the page as JSON):
- `{"type": "text", "text": ...}`
- `{"type": "tool_call", "name": ..., "arguments": ..., "raw": ...}` — from the message's `tool_calls`, or from
  `<tool_call>...</tool_call>` blocks in an assistant's raw text (the Hermes format the loops parse);
- `{"type": "image", "src": ...}` — an `image_url` part: a data URL kept as is, an `http(s)` URL kept as a link,
  a path relative to the run directory inlined as a data URL (up to `MAX_INLINE_IMAGE_BYTES`; larger ones are
  linked relative to the page); `{"type": "image", "missing": path}` when the file is not there.
"""

from __future__ import annotations

import base64
import contextlib
import json
import mimetypes
import os
import re
from pathlib import Path
from typing import Any

from agentrl.types import Message

MAX_INLINE_IMAGE_BYTES = 4 << 20
_TOOL_CALL_BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)


def message_view(message: Message, run_dir: Path, page_dir: Path) -> dict[str, Any]:
    """One message for the page: role, name, tool_call_id and its parts."""
    parts = _content_parts(message.content, run_dir, page_dir)
    if message.role == "assistant":
        parts = [p for part in parts for p in _split_tool_calls(part)]
    parts += [_tool_call_field(call) for call in message.tool_calls or []]
    view: dict[str, Any] = {"role": message.role, "parts": parts}
    if message.name:
        view["name"] = message.name
    if message.tool_call_id:
        view["tool_call_id"] = message.tool_call_id
    return view


def _content_parts(content: str | list[dict[str, Any]] | None, run_dir: Path, page_dir: Path) -> list[dict]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    parts: list[dict[str, Any]] = []
    for part in content:
        kind = part.get("type")
        if kind == "text":
            parts.append({"type": "text", "text": str(part.get("text", ""))})
        elif kind in ("image_url", "image"):
            url = part.get("image_url", part.get("image"))
            if isinstance(url, dict):
                url = url.get("url")
            parts.append(image_part(str(url or ""), run_dir, page_dir))
        else:
            parts.append({"type": "text", "text": json.dumps(part, ensure_ascii=False)})
    return parts


def image_part(url: str, run_dir: Path, page_dir: Path) -> dict[str, Any]:
    """An image for the page; see the module docstring for how each kind of URL is handled."""
    if url.startswith(("data:", "http://", "https://")):
        return {"type": "image", "src": url}
    path = Path(url.removeprefix("file://"))
    file = path if path.is_absolute() else run_dir / path
    if not file.is_file():
        return {"type": "image", "missing": url}
    if file.stat().st_size > MAX_INLINE_IMAGE_BYTES:
        return {"type": "image", "src": Path(os.path.relpath(file.resolve(), page_dir.resolve())).as_posix()}
    mime = mimetypes.guess_type(file.name)[0] or "image/png"
    return {"type": "image", "src": f"data:{mime};base64,{base64.b64encode(file.read_bytes()).decode('ascii')}"}


def _split_tool_calls(part: dict[str, Any]) -> list[dict[str, Any]]:
    if part["type"] != "text" or "<tool_call>" not in part["text"]:
        return [part]
    text, out, pos = part["text"], [], 0
    for match in _TOOL_CALL_BLOCK.finditer(text):
        if match.start() > pos:
            out.append({"type": "text", "text": text[pos : match.start()]})
        out.append(_tool_call_text(match.group(1), match.group(0)))
        pos = match.end()
    if pos < len(text):
        out.append({"type": "text", "text": text[pos:]})
    return [p for p in out if p["type"] != "text" or p["text"].strip()]


def _tool_call_text(body: str, raw: str) -> dict[str, Any]:
    try:
        call = json.loads(body)
    except json.JSONDecodeError:
        return {"type": "tool_call", "name": "", "arguments": body, "raw": raw, "malformed": True}
    if not isinstance(call, dict):
        return {"type": "tool_call", "name": "", "arguments": body, "raw": raw, "malformed": True}
    name, arguments = str(call.get("name", "")), _pretty(call.get("arguments"))
    return {"type": "tool_call", "name": name, "arguments": arguments, "raw": raw}


def _tool_call_field(call: dict[str, Any]) -> dict[str, Any]:
    function = call.get("function", call)
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        with contextlib.suppress(json.JSONDecodeError):  # shown as written when it is not JSON
            arguments = json.loads(arguments)
    view = {"type": "tool_call", "name": str(function.get("name", "")), "arguments": _pretty(arguments)}
    if call.get("id"):
        view["id"] = str(call["id"])
    return view


def _pretty(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False)
