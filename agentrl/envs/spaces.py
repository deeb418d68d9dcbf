"""Action codecs: text → a valid action of a gymnasium space, and back, one class per space type.

A codec parses the model's reply into an action the space `contains`, or raises `InvalidAction` with feedback
that names the valid form (the loop shows that feedback to the model). `format` is the inverse: the text an
action is written as, so that `parse(format(a)) == a` (`check_env` verifies this round trip).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
from gymnasium import spaces

from agentrl.errors import UserError

_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?inf|nan", re.IGNORECASE)


class InvalidAction(Exception):
    """The reply is not a valid action; `str(exc)` is the feedback shown to the model."""


class ActionCodec(Protocol):
    """Text ↔ action for one space."""

    def describe(self) -> str:
        """The valid form of an action, in one sentence (used in instructions and feedback)."""

    def parse(self, text: str) -> Any:
        """The action the reply names; raises `InvalidAction` saying the valid form."""

    def format(self, action: Any) -> str:
        """The text an action is written as (the inverse of `parse`)."""


class DiscreteCodec:
    """`Discrete(n, start)`: a name from `names` (case-insensitive) or, without names, an integer.

    A reply that is exactly a name or an index is taken as is; otherwise a reply mentioning exactly one action
    name as a word ("I move LEFT.") names that action; a reply naming several actions, or none, is invalid.
    """

    def __init__(self, space: spaces.Discrete, names: Sequence[str] | None = None):
        self.space = space
        self.start = int(space.start)
        self.n = int(space.n)
        if names is not None and len(names) != self.n:
            raise UserError(
                f"{len(names)} action names given for a Discrete({self.n}) space; give exactly one name per action"
            )
        self.names = [str(n) for n in names] if names is not None else None
        if self.names is not None and len({n.lower() for n in self.names}) != self.n:
            raise UserError(f"action names {self.names} repeat (case-insensitively); give distinct names")

    def describe(self) -> str:
        if self.names:
            return f"one of {', '.join(self.names)}"
        return f"a whole number from {self.start} to {self.start + self.n - 1}"

    def parse(self, text: str) -> np.int64:
        reply = text.strip().strip(".!\"'`*").strip()
        if self.names is None:
            numbers = re.findall(r"[-+]?\d+", reply)
            if len(numbers) == 1 and self.start <= int(numbers[0]) < self.start + self.n:
                return np.int64(int(numbers[0]))
            raise InvalidAction(f"Invalid action {_quote(text)}. Reply with {self.describe()}.")
        lowered = [n.lower() for n in self.names]
        if reply.lower() in lowered:
            return np.int64(self.start + lowered.index(reply.lower()))
        if reply.lstrip("+-").isdigit() and self.start <= int(reply) < self.start + self.n:
            return np.int64(int(reply))
        found = {i for i, name in enumerate(lowered) if re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text.lower())}
        if len(found) == 1:
            return np.int64(self.start + found.pop())
        which = "several actions" if found else "no action"
        raise InvalidAction(f"Invalid action {_quote(text)}: it names {which}. Reply with {self.describe()}.")

    def format(self, action: Any) -> str:
        index = int(action) - self.start
        return self.names[index] if self.names else str(int(action))


class TextCodec:
    """`Text(min_length, max_length, charset)`: the reply itself, stripped of surrounding whitespace."""

    def __init__(self, space: spaces.Text):
        self.space = space

    def describe(self) -> str:
        return f"a text of {self.space.min_length} to {self.space.max_length} characters"

    def parse(self, text: str) -> str:
        reply = text.strip()
        if not self.space.contains(reply):
            bad = sorted({c for c in reply if c not in self.space.character_set})
            why = f"characters not allowed: {''.join(bad)!r}" if bad else f"{len(reply)} characters"
            raise InvalidAction(f"Invalid action ({why}). Reply with {self.describe()}.")
        return reply

    def format(self, action: Any) -> str:
        return str(action)


class IntVectorCodec:
    """`MultiDiscrete` and `MultiBinary`: whole numbers separated by spaces or commas, brackets optional."""

    def __init__(self, space: spaces.MultiDiscrete | spaces.MultiBinary):
        self.space = space
        if isinstance(space, spaces.MultiBinary):
            self.low = np.zeros(space.shape, dtype=np.int64)
            self.high = np.ones(space.shape, dtype=np.int64)
        else:
            self.low = np.asarray(space.start, dtype=np.int64)
            self.high = self.low + np.asarray(space.nvec, dtype=np.int64) - 1
        self.size = int(np.prod(space.shape))

    def describe(self) -> str:
        bounds = ", ".join(f"{lo}..{hi}" for lo, hi in zip(self.low.ravel(), self.high.ravel(), strict=True))
        return f"{self.size} whole numbers separated by spaces, in the ranges {bounds}"

    def parse(self, text: str) -> np.ndarray:
        numbers = re.findall(r"[-+]?\d+(?:\.\d+)?", text)
        if len(numbers) != self.size or any("." in n for n in numbers):
            raise InvalidAction(f"Invalid action {_quote(text)}: expected {self.describe()}.")
        action = np.array([int(n) for n in numbers], dtype=self.space.dtype).reshape(self.space.shape)
        if not self.space.contains(action):
            raise InvalidAction(f"Invalid action {_quote(text)}: out of range. Reply with {self.describe()}.")
        return action

    def format(self, action: Any) -> str:
        return " ".join(str(int(v)) for v in np.asarray(action).ravel())


class BoxCodec:
    """`Box(low, high, shape)`: numbers separated by spaces or commas, checked against the bounds."""

    def __init__(self, space: spaces.Box):
        self.space = space
        self.size = int(np.prod(space.shape))

    def describe(self) -> str:
        low, high = self.space.low.ravel(), self.space.high.ravel()
        if np.all(low == low[0]) and np.all(high == high[0]):
            bounds = f"each between {_num(low[0])} and {_num(high[0])}"
        else:
            bounds = "in the ranges " + ", ".join(f"{_num(lo)}..{_num(hi)}" for lo, hi in zip(low, high, strict=True))
        kind = "whole numbers" if np.issubdtype(self.space.dtype, np.integer) else "numbers"
        return f"{self.size} {kind} separated by spaces, {bounds}"

    def parse(self, text: str) -> np.ndarray:
        numbers = _NUMBER.findall(text)
        if len(numbers) != self.size:
            raise InvalidAction(f"Invalid action {_quote(text)}: expected {self.describe()}.")
        values = np.array([float(n) for n in numbers], dtype=np.float64)
        if not np.all(np.isfinite(values)):
            raise InvalidAction(f"Invalid action {_quote(text)}: numbers must be finite. Reply with {self.describe()}.")
        action = values.astype(self.space.dtype).reshape(self.space.shape)
        if not self.space.contains(action):
            raise InvalidAction(f"Invalid action {_quote(text)}: out of bounds. Reply with {self.describe()}.")
        return action

    def format(self, action: Any) -> str:
        return " ".join(_num(v) for v in np.asarray(action).ravel())


def codec_for(space: spaces.Space[Any], names: Sequence[str] | None = None) -> ActionCodec:
    """The built-in codec of an action space (`names` label the actions of a `Discrete` space).

    Raises:
        UserError: the space type has no built-in codec (the message says how to write an adapter).
    """
    if isinstance(space, spaces.Discrete):
        return DiscreteCodec(space, names)
    if names is not None:
        raise UserError(f"action names are only supported for Discrete action spaces, not {space}")
    if isinstance(space, spaces.Text):
        return TextCodec(space)
    if isinstance(space, spaces.MultiDiscrete | spaces.MultiBinary):
        return IntVectorCodec(space)
    if isinstance(space, spaces.Box):
        return BoxCodec(space)
    raise UserError(
        f"no built-in text codec for action space {space}; write an EnvAdapter subclass that overrides "
        "parse_action/action_text and name it with env.adapter=pkg.module:MyAdapter"
    )


def _num(value: Any) -> str:
    """A number as short text that parses back to the same value (integers without a decimal point)."""
    f = float(value)
    return str(int(f)) if f.is_integer() and abs(f) < 1e15 else repr(f)


def _quote(text: str, limit: int = 40) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")
