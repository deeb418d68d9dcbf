"""Adapters that make plain functions reward components.

- `FunctionComponent`: `fn(inp: RewardInput, **kwargs)`, sync or async, returning a `RewardResult`, a number
  or a `{"score": ...}` dict (the rules in `agentrl.rewards.rule` are such functions).
- `ComputeScoreComponent`: verl's `compute_score(data_source, solution_str, ground_truth, extra_info, **kwargs)`,
  sync or async, returning a number or a dict with `score`. `solution_str` is the model's final answer.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

from agentrl.rewards.base import RewardComponent, RewardInput, RewardResult, as_result

VERL_PARAMS = ("data_source", "solution_str", "ground_truth", "extra_info")


def is_compute_score(fn: Callable[..., Any]) -> bool:
    """Whether `fn` has verl's `compute_score` signature (it takes `solution_str`, or `data_source` first)."""
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return False
    return "solution_str" in params or (bool(params) and params[0] == "data_source")


def _describe(fn: Callable[..., Any]) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


async def _call(fn: Callable[..., Any], thread: bool, *args: Any, **kwargs: Any) -> Any:
    """Call a sync or async function; a sync one runs in a worker thread when `thread`."""
    if inspect.iscoroutinefunction(fn):
        return await fn(*args, **kwargs)
    value = await asyncio.to_thread(fn, *args, **kwargs) if thread else fn(*args, **kwargs)
    if inspect.isawaitable(value):
        value = await value
    return value


class FunctionComponent(RewardComponent):
    """A function of the `RewardInput` (plus the YAML entry's extra keys) as a component.

    Args:
        fn: the function.
        kwargs: extra keyword arguments from the YAML entry.
        thread: run a sync function in a worker thread (default: the function's `blocking` attribute).
    """

    def __init__(self, fn: Callable[..., Any], kwargs: dict[str, Any] | None = None, thread: bool | None = None):
        self.fn = fn
        self.kwargs = kwargs or {}
        self.thread = bool(getattr(fn, "blocking", False)) if thread is None else thread

    async def ascore(self, inp: RewardInput) -> RewardResult:
        return as_result(await _call(self.fn, self.thread, inp, **self.kwargs), _describe(self.fn))


class ComputeScoreComponent(RewardComponent):
    """A verl-style `compute_score` function as a component.

    It is called with the sample's `data_source`, the final answer as `solution_str`, the sample's
    `ground_truth` and a copy of its `extra_info` (with `num_turns` added when absent), plus the YAML
    entry's extra keys.
    """

    def __init__(self, fn: Callable[..., Any], kwargs: dict[str, Any] | None = None, thread: bool = False):
        self.fn = fn
        self.kwargs = kwargs or {}
        self.thread = thread

    async def ascore(self, inp: RewardInput) -> RewardResult:
        extra_info = {**inp.sample.extra_info}
        extra_info.setdefault("num_turns", inp.trajectory.num_turns)
        value = await _call(
            self.fn,
            self.thread,
            data_source=inp.sample.data_source,
            solution_str=inp.answer,
            ground_truth=inp.sample.ground_truth,
            extra_info=extra_info,
            **self.kwargs,
        )
        return as_result(value, _describe(self.fn))
