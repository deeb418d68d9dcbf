"""The tool_pick recipe's `lookup` tool: a drawer of two keys under each four-letter key, a number under each key.

The entry under a four-letter key names two three-digit keys; the entry under a three-digit key is a three-digit
number. A question asks for the number under the first or the second key of a drawer: one lookup that every
episode of the prompt writes alike (copy the key from the question), then a choice between the two keys it
returned. The table is a hash, so it needs no data file: the agent cannot guess an entry, it has to look it up.
"""

from __future__ import annotations

import hashlib
import re

from agentrl.tools.decorator import tool

KEY = re.compile(r"[A-Z]{4}|[1-9][0-9]{2}")


def _number(text: str) -> int:
    return 100 + int(hashlib.sha256(text.encode()).hexdigest(), 16) % 900


def drawer(key: str) -> tuple[int, int]:
    """The two three-digit keys stored under the four-letter `key` (deterministic, never equal)."""
    first, second = _number(key), _number(key + "/2")
    return first, second if second != first else 100 + (first - 99) % 900


def number(key: int | str) -> int:
    """The three-digit number stored under a three-digit key."""
    return _number(f"#{key}")


def answer(key: str, which: int) -> int:
    """The answer to the question about `key`: the number under its drawer's first (0) or second (1) key."""
    return number(drawer(key)[which])


@tool
def lookup(key: str) -> str:
    """Look up what is stored under a key.

    Args:
        key: four capital letters (e.g. KQZV) or a three-digit number (e.g. 417).

    Raises:
        ValueError: `key` is neither (the model sees the message as the tool's error).
    """
    key = key.strip().upper()
    if not KEY.fullmatch(key):
        raise ValueError(f"{key!r} is not a key; keys are four capital letters (KQZV) or three digits (417)")
    if key.isalpha():
        first, second = drawer(key)
        return f"two keys: {first} (the first) and {second} (the second)"
    return str(number(key))
