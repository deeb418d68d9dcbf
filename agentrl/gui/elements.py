"""The compact element list the model reads each turn: id, kind, text or value, and center position.

MiniWoB reports every visible DOM element (`ref` ids); the list keeps those a user can act on or read: form
controls, and leaf elements with text. Containers without text of their own are left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

INTERACTIVE_TAGS = ("button", "input", "textarea", "select", "option", "a", "label")


@dataclass(frozen=True)
class Element:
    """One element on the screen.

    Attributes:
        id: the id `click(id)` takes (MiniWoB's `ref`).
        tag: lower-case tag; inputs carry their type (`input_text`, `input_checkbox`).
        text: the element's text, or an input's value.
        x, y: its center in screen pixels (what `click(x, y)` takes).
        width, height: its size in pixels.
        focused: it has the keyboard focus.
        checked: a checkbox or radio that is checked (None for other elements).
    """

    id: int
    tag: str
    text: str
    x: int
    y: int
    width: int
    height: int
    focused: bool = False
    checked: bool | None = None

    def describe(self) -> str:
        """One line: `[4] button "Submit" at (80,120)`."""
        parts = [f"[{self.id}] {self.tag}"]
        if self.text:
            parts.append(_quote(self.text))
        if self.checked is not None:
            parts.append("checked" if self.checked else "unchecked")
        if self.focused:
            parts.append("focused")
        parts.append(f"at ({self.x},{self.y})")
        return " ".join(parts)


def extract_elements(dom_elements: Iterable[Mapping[str, Any]], max_elements: int = 40) -> list[Element]:
    """The actionable and readable elements of a MiniWoB observation's `dom_elements`, in page order.

    Args:
        dom_elements: `observation["dom_elements"]` (serialized MiniWoB elements).
        max_elements: keep at most this many (the rest are dropped from the end).
    """
    out: list[Element] = []
    for raw in dom_elements:
        tag = str(raw["tag"]).lower()
        text = str(raw.get("text") or "").strip()
        value = raw.get("value")
        interactive = tag.split("_")[0] in INTERACTIVE_TAGS
        is_leaf = bool(_flags(raw)[3])
        if not interactive and not (is_leaf and text):
            continue
        checked = None
        if tag in ("input_checkbox", "input_radio"):
            checked = str(value).lower() in ("true", "1")
        elif tag.startswith(("input", "textarea")) and value not in (None, "", False):
            text = str(value)
        left, top, width, height = (_num(raw[k]) for k in ("left", "top", "width", "height"))
        out.append(
            Element(
                id=int(raw["ref"]),
                tag=tag,
                text=text[:80],
                x=round(left + width / 2),
                y=round(top + height / 2),
                width=round(width),
                height=round(height),
                focused=bool(_flags(raw)[0]),
                checked=checked,
            )
        )
    return out[:max_elements]


def format_elements(elements: list[Element]) -> str:
    """The element list as the model reads it, one element per line."""
    if not elements:
        return "(no interactive elements)"
    return "\n".join(e.describe() for e in elements)


def _flags(raw: Mapping[str, Any]) -> list[int]:
    flags = raw.get("flags")
    return [int(f) for f in flags] if flags is not None else [0, 0, 0, 0]


def _num(value: Any) -> float:
    """MiniWoB stores positions as 1-element arrays."""
    try:
        return float(value[0])
    except (TypeError, IndexError):
        return float(value)


def _quote(text: str) -> str:
    return '"' + text.replace('"', "'") + '"'
