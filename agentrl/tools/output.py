"""Capping tool output to a token budget, with a marker the model can see."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

CHARS_PER_TOKEN = 4
"""Estimate used when no tokenizer is given."""


def approx_count_tokens(text: str) -> int:
    """Roughly the number of tokens in `text` (one per 4 characters)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def approx_truncate_tokens(text: str, max_tokens: int) -> str:
    """The first ~`max_tokens` tokens of `text` (4 characters each)."""
    return text[: max_tokens * CHARS_PER_TOKEN]


def truncation_marker(omitted_tokens: int) -> str:
    """The line appended to a capped output."""
    return f"\n[output truncated: {omitted_tokens} more tokens]"


def cap_output(
    text: str,
    max_tokens: int,
    count_tokens: Callable[[str], int] | None = None,
    truncate_tokens: Callable[[str, int], str] | None = None,
) -> tuple[str, bool]:
    """Keep the first `max_tokens` tokens of `text` and mark what was cut.

    Args:
        text: the tool output.
        max_tokens: the cap; 0 or less disables it.
        count_tokens: counts tokens with the policy's tokenizer; defaults to ~4 characters per token.
        truncate_tokens: keeps the first n tokens; defaults to ~4 characters per token.

    Returns:
        The (possibly) capped text, with `[output truncated: N more tokens]` appended when cut, and whether
        it was cut.
    """
    count = count_tokens or approx_count_tokens
    truncate = truncate_tokens or approx_truncate_tokens
    if max_tokens <= 0:
        return text, False
    total = count(text)
    if total <= max_tokens:
        return text, False
    return truncate(text, max_tokens) + truncation_marker(total - max_tokens), True


def to_text(value: Any) -> str:
    """A tool's return value as text: strings as they are, None as "", anything else JSON-encoded."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)
