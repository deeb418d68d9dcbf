"""Reading a judge's verdict: a score in [0, 1] from free text, or None when the text holds none.

Understood, in order of trust: a JSON object with `score` (or `rating`/`grade`); a labelled score (`Score: 7`,
`Rating = 7/10`, `score is 7 out of 10`); MT-Bench's `[[7]]`; a fraction `7/10`; a reply that starts with a
number followed by words or punctuation (`7`, `7.5 - good`; not `2 + 3 = 5`). A score with a denominator is
divided by it, otherwise by `scale`. Values outside [0, scale] (or above their denominator) are garbage, not
clipped.
"""

from __future__ import annotations

import json
import re

_NUM = r"(-?\d+(?:\.\d+)?)"
_DENOM = rf"(?:\s*(?:/|out of)\s*{_NUM})?"
_LABELLED = re.compile(rf"\b(?:score|rating|grade)\b\s*(?:is|of|[:=])?\s*\**\s*\[*{_NUM}\]*{_DENOM}", re.I)
_BRACKETS = re.compile(rf"\[\[\s*{_NUM}\s*\]\]")
_FRACTION = re.compile(rf"(?<![\w.]){_NUM}\s*(?:/|out of)\s*{_NUM}(?!\w|\.\d)")
_LEADING = re.compile(rf"^\W{{0,3}}{_NUM}(?:\s*$|\s*[.,;:!)\]]|\s+-\s|\s+[A-Za-z])(?!\s*out of)")
_JSON = re.compile(r"\{[^{}]*\}")
_KEYS = ("score", "rating", "grade")


def parse_score(text: str | None, scale: float = 10.0) -> float | None:
    """The verdict in `text` normalized to [0, 1], or None (see the module docstring)."""
    if not text:
        return None
    text = text.strip()
    for candidate in (_from_json(text), _from_labelled(text)):
        if candidate is not None:
            return _normalize(*candidate, scale)
    if m := _BRACKETS.search(text):
        return _normalize(float(m.group(1)), None, scale)
    if m := _FRACTION.search(text):
        return _normalize(float(m.group(1)), float(m.group(2)), scale)
    if m := _LEADING.match(text):
        return _normalize(float(m.group(1)), None, scale)
    return None


def _from_json(text: str) -> tuple[float, float | None] | None:
    for blob in _JSON.findall(text):
        try:
            obj = json.loads(blob)
        except ValueError:
            continue
        if isinstance(obj, dict):
            for key in _KEYS:
                value = obj.get(key)
                if isinstance(value, int | float) and not isinstance(value, bool):
                    return float(value), None
                if isinstance(value, str) and re.fullmatch(r"\s*-?\d+(\.\d+)?\s*", value):
                    return float(value), None
    return None


def _from_labelled(text: str) -> tuple[float, float | None] | None:
    m = _LABELLED.search(text)
    if m is None:
        return None
    return float(m.group(1)), float(m.group(2)) if m.group(2) else None


def _normalize(value: float, denominator: float | None, scale: float) -> float | None:
    top = denominator if denominator else scale
    if top <= 0 or not 0 <= value <= top:
        return None
    return value / top
