"""The tool_chain recipe's `lookup` tool: a table of entries under four-letter keys and three-digit numbers.

Every entry holds a three-digit number, and that number is a key too: a question asks for the entry two lookups
away. An entry under a letter key says it is a key to look up next (SmolLM2-135M answers with the first tool
result it sees otherwise: 0 of 64 sampled episodes made a second call). The table is a hash, so it needs no data
file and has an entry for every key: the agent cannot guess an entry, it has to look it up, and a key copied wrong
looks up a different entry (which the answer then gets wrong).
"""

from __future__ import annotations

import hashlib
import re

from agentrl.tools.decorator import tool

KEY = re.compile(r"[A-Z]{4}|[1-9][0-9]{2}")


def entry(key: str) -> int:
    """The three-digit number stored under `key` (deterministic)."""
    return 100 + int(hashlib.sha256(key.encode()).hexdigest(), 16) % 900


def second_entry(key: str) -> int:
    """The entry under the entry under `key`: the answer to the question about `key`."""
    return entry(str(entry(key)))


@tool
def lookup(key: str) -> str:
    """Look up the number stored under a key.

    Args:
        key: four capital letters (e.g. KQZV) or a three-digit number (e.g. 417).

    Raises:
        ValueError: `key` is neither (the model sees the message as the tool's error).
    """
    key = key.strip().upper()
    if not KEY.fullmatch(key):
        raise ValueError(f"{key!r} is not a key; keys are four capital letters (KQZV) or three digits (417)")
    found = entry(key)
    return f"{found} (a key too: look up {found} next)" if key.isalpha() else str(found)
