"""Reward types: what a YAML `type` names (the `REWARDS` registry), and how it becomes a `RewardComponent`.

A `type` is one of:
- a rule (exact_match, normalized_match, regex, contains, brevity, math, numeric, format, tool_use, tool_result,
  uses_tool_result, command);
- a registered component (`reward_model`, `similarity`, `judge`, `swe_tests`, `harbor_task`, `compute_score`, or
  your own, added with `@register_reward("name")`);
- a dotted path `pkg.module:attr` / `pkg.module.attr`, or a file `path/to/file.py:attr`, naming a
  `RewardComponent` subclass (built with the entry's keys), a function of a `RewardInput`, or a verl-style
  `compute_score(data_source, solution_str, ground_truth, extra_info)`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from agentrl.errors import UserError
from agentrl.registry import Registry, import_object
from agentrl.rewards.base import RewardComponent
from agentrl.rewards.functions import ComputeScoreComponent, FunctionComponent, is_compute_score

T = TypeVar("T")


def _is_reward(obj: Any) -> bool:
    return isinstance(obj, RewardComponent) or callable(obj)


REWARDS: Registry[Any] = Registry(
    "reward type",
    {
        "exact_match": "agentrl.rewards.rule:exact_match",
        "normalized_match": "agentrl.rewards.rule:normalized_match",
        "regex": "agentrl.rewards.rule:regex_match",
        "contains": "agentrl.rewards.rule:contains",
        "brevity": "agentrl.rewards.rule:brevity",
        "math": "agentrl.rewards.equivalence:math_equiv",
        "numeric": "agentrl.rewards.equivalence:numeric_match",
        "format": "agentrl.rewards.rule:format_check",
        "tool_use": "agentrl.rewards.agentic:tool_use",
        "tool_result": "agentrl.rewards.agentic:tool_result",
        "uses_tool_result": "agentrl.rewards.agentic:uses_tool_result",
        "command": "agentrl.rewards.agentic:command_passes",
        "reward_model": "agentrl.rewards.model:RewardModelComponent",
        "similarity": "agentrl.rewards.similarity:EncoderSimilarity",
        "judge": "agentrl.rewards.judge:LLMJudge",
        "swe_tests": "agentrl.rewards.swe:SWETestsReward",
        "harbor_task": "agentrl.rewards.harbor:HarborTaskReward",
        "compute_score": "agentrl.rewards.functions:ComputeScoreComponent",
        "reasoning_gym": "agentrl.rewards.reasoning_gym:reasoning_gym_score",
    },
    accepts=_is_reward,
    expected="a RewardComponent subclass or instance, or a reward function",
    example="my_pkg.rewards:my_reward (or path/to/file.py:my_reward)",
)
"""Reward components and rules by YAML `type`: a `RewardComponent` class or instance, or a function."""


def register_reward(name: str) -> Callable[[T], T]:
    """Decorator registering a `RewardComponent` subclass or a reward function under `name` (refuses a name
    already taken)."""
    return REWARDS.register(name)


def resolve_type(kind: Any, where: str) -> Any:
    """The object a `type` names (see the module docstring)."""
    try:
        return REWARDS.get(kind)
    except UserError as exc:
        raise UserError(f"{where}.type: {exc}") from None


def check_component(kind: Any, kwargs: dict[str, Any], where: str) -> str | None:
    """What is wrong with `type: kind` and its options `kwargs` (None if nothing), without building it (a reward
    model would load its weights)."""
    try:
        obj = resolve_type(kind, where)
        if obj is ComputeScoreComponent:
            function = kwargs.get("function")
            if not function:
                return f"{where}: type compute_score needs `function: pkg.module:compute_score`"
            import_object(function, f"{where}.function")
        elif isinstance(obj, type) and issubclass(obj, RewardComponent):
            _check_kwargs(obj, kwargs, where, skip_first=False)
        elif isinstance(obj, RewardComponent):
            if kwargs:
                return f"{where}: {kind} is a component instance and takes no options {sorted(kwargs)}"
        elif not is_compute_score(obj):
            _check_kwargs(obj, kwargs, where)
    except UserError as exc:
        return str(exc)
    return None


def build_component(kind: Any, kwargs: dict[str, Any], where: str, thread: bool | None = None) -> RewardComponent:
    """A component for `type: kind` with the YAML entry's remaining keys as `kwargs` (checked by `check_component`
    first, so a bad entry fails the same way at validation and at build time)."""
    if problem := check_component(kind, kwargs, where):
        raise UserError(problem)
    obj = resolve_type(kind, where)
    kwargs = dict(kwargs)
    try:
        if obj is ComputeScoreComponent:
            function = import_object(kwargs.pop("function"), f"{where}.function")
            return ComputeScoreComponent(function, kwargs, thread=bool(thread))
        if isinstance(obj, type) and issubclass(obj, RewardComponent):
            return obj(**kwargs)
        if isinstance(obj, RewardComponent):
            return obj
        if is_compute_score(obj):
            return ComputeScoreComponent(obj, kwargs, thread=bool(thread))
        return FunctionComponent(obj, kwargs, thread=thread)
    except (TypeError, ValueError) as exc:  # a component's own check of its options
        raise UserError(f"{where} ({kind}): bad options: {exc}") from None


def _check_kwargs(fn: Callable[..., Any], kwargs: dict[str, Any], where: str, skip_first: bool = True) -> None:
    """Fail at build time, not per trajectory, when a function (after its `RewardInput`) or a class does not
    accept the entry's keys."""
    try:
        inspect.signature(fn).bind(*([None] if skip_first else []), **kwargs)
    except TypeError as exc:
        raise UserError(f"{where}: options {sorted(kwargs)} do not fit {fn.__name__} (bad options: {exc})") from None
    except ValueError:
        pass
