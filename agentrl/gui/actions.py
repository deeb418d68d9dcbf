"""The GUI agent's action language: `click(3)`, `click(40, 120)`, `type("hi")`, `press("Enter")`, `scroll(0, 100)`,
`done()`, parsed from free model text into typed actions, with feedback that names the valid forms.

The first action call in a reply is taken; text around it (reasoning, code fences) is ignored.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Literal

ActionKind = Literal["click_element", "click_xy", "type", "press", "scroll", "done"]

ACTION_HELP = (
    'one action per reply: click(ID) on an element id from the list, click(X, Y) at screen pixels, type("text") '
    'into the focused field (or type(ID, "text") to click a field and type), press("Enter") for a key, '
    "scroll(DX, DY) in pixels, or done() when the task is finished"
)

KEYS = {
    "enter": "<Enter>",
    "return": "<Enter>",
    "tab": "<Tab>",
    "space": "<Space>",
    "backspace": "<Backspace>",
    "delete": "<Delete>",
    "pageup": "<PageUp>",
    "pagedown": "<PageDown>",
    "arrowup": "<ArrowUp>",
    "arrowdown": "<ArrowDown>",
    "arrowleft": "<ArrowLeft>",
    "arrowright": "<ArrowRight>",
    "up": "<ArrowUp>",
    "down": "<ArrowDown>",
    "left": "<ArrowLeft>",
    "right": "<ArrowRight>",
}
"""Key names `press` accepts (case-insensitive, with or without `<...>`), besides single printable characters."""

_CALL = re.compile(r"\b(click|type|press|scroll|done)\s*\(", re.IGNORECASE)


class InvalidAction(ValueError):
    """A reply that is not a valid action; the message is the feedback shown to the model."""


@dataclass(frozen=True)
class GUIAction:
    """One parsed action.

    Attributes:
        kind: what to do.
        element: the element id (`click_element`, and `type` with a target field).
        x, y: screen pixels (`click_xy`) or scroll amounts (`scroll`: x is dx, y is dy).
        text: the text to type, or the key to press (`<Enter>` form).
        source: the call as written by the model.
    """

    kind: ActionKind
    element: int | None = None
    x: float = 0.0
    y: float = 0.0
    text: str = ""
    source: str = ""


def parse_action(reply: str, screen: tuple[int, int] = (160, 210)) -> GUIAction:
    """Parse the first action call in `reply`.

    Args:
        reply: the model's text.
        screen: width and height of the screen in pixels (click coordinates must lie inside).

    Raises:
        InvalidAction: no call, unbalanced parentheses, wrong arguments; the message says what to write instead.
    """
    match = _CALL.search(reply)
    if match is None:
        raise InvalidAction(f"no action found in your reply; write {ACTION_HELP}")
    name = match.group(1).lower()
    inner, end = _arguments(reply, match.end())
    source = reply[match.start() : end]
    if name == "done":
        if inner.strip():
            raise InvalidAction(f"{source}: done() takes no arguments")
        return GUIAction("done", source=source)
    args = _literals(name, inner, source)
    return _build(name, args, source, screen)


def _arguments(reply: str, start: int) -> tuple[str, int]:
    """The text between the call's parentheses (quotes respected) and the index after the closing one."""
    depth, quote, i = 1, "", start
    while i < len(reply):
        ch = reply[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return reply[start:i], i + 1
        i += 1
    raise InvalidAction(f"{reply[start - 6 : start + 30]!r}...: the call is not closed with ')'; write {ACTION_HELP}")


def _literals(name: str, inner: str, source: str) -> tuple[object, ...]:
    if not inner.strip():
        return ()
    try:
        value = ast.literal_eval(f"({inner},)")
    except (ValueError, SyntaxError):
        if name in ("type", "press"):  # unquoted text: type(hello world), press(Enter)
            return (inner.strip(),)
        raise InvalidAction(f"{source}: arguments must be numbers or quoted text; write {ACTION_HELP}") from None
    return tuple(value)


def _build(name: str, args: tuple[object, ...], source: str, screen: tuple[int, int]) -> GUIAction:
    nums = [a for a in args if isinstance(a, int | float) and not isinstance(a, bool)]
    if name == "click":
        if len(args) == 1 and isinstance(args[0], int) and not isinstance(args[0], bool):
            return GUIAction("click_element", element=args[0], source=source)
        if len(args) == 2 and len(nums) == 2:
            x, y = float(nums[0]), float(nums[1])
            if not (0 <= x <= screen[0] and 0 <= y <= screen[1]):
                raise InvalidAction(f"{source}: ({x:g}, {y:g}) is off the {screen[0]}x{screen[1]} screen")
            return GUIAction("click_xy", x=x, y=y, source=source)
        raise InvalidAction(f"{source}: click takes an element id, click(3), or a point, click(40, 120)")
    if name == "type":
        if len(args) == 1 and isinstance(args[0], str | int | float) and not isinstance(args[0], bool):
            return GUIAction("type", text=str(args[0]), source=source)
        if len(args) == 2 and isinstance(args[0], int) and isinstance(args[1], str | int | float):
            return GUIAction("type", element=args[0], text=str(args[1]), source=source)
        raise InvalidAction(f'{source}: type takes the text, type("hello"), or a field id and text, type(4, "hello")')
    if name == "press":
        if len(args) == 1 and isinstance(args[0], str):
            return GUIAction("press", text=_key(args[0], source), source=source)
        raise InvalidAction(f'{source}: press takes one key name, e.g. press("Enter") or press("Tab")')
    if len(args) == 2 and len(nums) == 2:  # scroll
        return GUIAction("scroll", x=float(nums[0]), y=float(nums[1]), source=source)
    raise InvalidAction(f"{source}: scroll takes two numbers of pixels, e.g. scroll(0, 100) to scroll down")


def _key(name: str, source: str) -> str:
    key = name.strip()
    if len(key) == 1 and key.isprintable():
        return key
    normalized = key.strip("<>").replace("_", "").replace(" ", "").lower()
    if normalized in KEYS:
        return KEYS[normalized]
    known = ", ".join(sorted({k.strip("<>") for k in KEYS.values()}))
    raise InvalidAction(f"{source}: unknown key {name!r}; keys: {known}, or one printable character")
