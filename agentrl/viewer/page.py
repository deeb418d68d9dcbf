"""Assembling the one self-contained HTML file: template + CSS + JS + data, all inlined (no CDN, no server)."""

from __future__ import annotations

import html
import json
import re
from importlib import resources
from typing import Any

DATA_ELEMENT_ID = "agentrl-data"


def render_page(payload: dict[str, Any], title: str) -> str:
    """The HTML page showing `payload` (see `agentrl.viewer.payload`)."""
    static = resources.files("agentrl.viewer") / "static"
    template = (static / "template.html").read_text(encoding="utf-8")
    values = {
        "TITLE": html.escape(title),
        "CSS": (static / "viewer.css").read_text(encoding="utf-8"),
        "JS": (static / "viewer.js").read_text(encoding="utf-8"),
        "DATA": embed_json(payload),
        "DATA_ID": DATA_ELEMENT_ID,
    }
    # one pass over the template only: inserted text (which may contain anything) is never scanned again
    return re.sub(r"\{\{(\w+)\}\}", lambda m: values[m.group(1)], template)


def embed_json(payload: Any) -> str:
    """JSON that is safe inside `<script type="application/json">`: no `<`, `>` or `&` can end the element."""
    text = json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
