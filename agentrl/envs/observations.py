"""Observation → text: an `ansi` rendering cleaned of terminal escapes, or a structured formatter per space type."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
from gymnasium import spaces

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def strip_ansi(text: str) -> str:
    """`text` without terminal escape sequences (colours), trailing spaces or surrounding blank lines."""
    lines = [line.rstrip() for line in _ANSI.sub("", text).splitlines()]
    return "\n".join(lines).strip("\n")


def format_observation(space: spaces.Space[Any], obs: Any, precision: int = 3) -> str:
    """A compact, deterministic text of `obs` for any standard gymnasium space.

    Discrete → the integer; Box / MultiDiscrete / MultiBinary → the numbers (rounded to `precision` digits,
    nested by shape); Text → the text; Tuple → `(a, b, ...)`; Dict → one `key: value` line per key.
    """
    if isinstance(space, spaces.Discrete):
        return str(int(obs))
    if isinstance(space, spaces.Text):
        return str(obs)
    if isinstance(space, spaces.Box | spaces.MultiDiscrete | spaces.MultiBinary):
        return _array(np.asarray(obs), precision)
    if isinstance(space, spaces.Tuple):
        parts = [format_observation(sub, o, precision) for sub, o in zip(space.spaces, obs, strict=True)]
        return "(" + ", ".join(parts) + ")"
    if isinstance(space, spaces.Dict):
        return "\n".join(f"{key}: {format_observation(sub, obs[key], precision)}" for key, sub in space.spaces.items())
    return str(obs)


def _array(values: np.ndarray, precision: int) -> str:
    if values.ndim == 0:
        return _scalar(values.item(), precision)
    return "[" + " ".join(_array(v, precision) for v in values) + "]"


def _scalar(value: Any, precision: int) -> str:
    if isinstance(value, bool | np.bool_):
        return str(int(value))
    if isinstance(value, int | np.integer):
        return str(int(value))
    rounded = round(float(value), precision)
    return str(int(rounded)) if rounded.is_integer() else f"{rounded:g}"
