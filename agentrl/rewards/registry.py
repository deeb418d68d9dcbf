"""Component types: what a YAML `type` names, and how it becomes a `RewardComponent`.

A `type` is one of:
- a rule name (`agentrl.rewards.rule.RULES`: exact_match, normalized_match, regex, math, numeric, format,
  tool_use, command);
- a registered component (`reward_model`, `similarity`, `judge`, `compute_score`, or your own, added with
  `@register_reward("name")`);
- a dotted path `pkg.module:attr` / `pkg.module.attr`, or a file `path/to/file.py:attr`, naming a
  `RewardComponent` subclass (built with the entry's keys), a function of a `RewardInput`, or a verl-style
  `compute_score(data_source, solution_str, ground_truth, extra_info)`.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from agentrl.errors import UserError
from agentrl.rewards.base import RewardComponent
from agentrl.rewards.functions import ComputeScoreComponent, FunctionComponent, is_compute_score
from agentrl.rewards.rule import RULES

COMPONENTS: dict[str, Any] = {
    "reward_model": "agentrl.rewards.model:RewardModelComponent",
    "similarity": "agentrl.rewards.similarity:EncoderSimilarity",
    "judge": "agentrl.rewards.judge:LLMJudge",
    "swe_tests": "agentrl.rewards.swe:SWETestsReward",
    "compute_score": "compute_score",
}
"""Registered components by name: a class, a function, or the dotted path of one (imported when used)."""

T = TypeVar("T")


def register_reward(name: str) -> Callable[[T], T]:
    """Decorator registering a `RewardComponent` subclass or a reward function under `name`."""

    def decorate(obj: T) -> T:
        COMPONENTS[name] = obj
        return obj

    return decorate


def known_types() -> list[str]:
    """Every type name, rules first, in registration order."""
    return [*RULES, *(n for n in COMPONENTS if n not in RULES)]


def load_object(path: str) -> Any:
    """Import `pkg.module:attr`, `pkg.module.attr` or `path/to/file.py:attr`.

    Raises:
        UserError: the module, file or attribute does not exist.
    """
    target, sep, attr = path.rpartition(":")
    if not sep:
        target, _, attr = path.rpartition(".")
    try:
        module = _load_file(Path(target)) if target.endswith(".py") else importlib.import_module(target)
        return getattr(module, attr)
    except (ImportError, AttributeError, FileNotFoundError, ValueError) as exc:
        raise UserError(f"cannot import reward {path!r}: {exc}") from None


def _load_file(path: Path) -> Any:
    path = path.resolve()
    name = f"agentrl_reward_{hashlib.sha1(str(path).encode()).hexdigest()[:12]}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None or not path.is_file():
        raise FileNotFoundError(f"no Python file {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def resolve_type(kind: Any, where: str) -> Any:
    """The object a `type` names (see the module docstring)."""
    if not isinstance(kind, str) or not kind:
        raise UserError(f"{where}.type is {kind!r}; {_known()}")
    if kind in RULES:
        return RULES[kind]
    entry = COMPONENTS.get(kind)
    if entry == "compute_score":
        return entry
    if isinstance(entry, str):
        return load_object(entry)
    if entry is not None:
        return entry
    if "." in kind or ":" in kind:
        return load_object(kind)
    raise UserError(f"{where}.type is {kind!r}; {_known()}")


def build_component(kind: Any, kwargs: dict[str, Any], where: str, thread: bool | None = None) -> RewardComponent:
    """A component for `type: kind` with the YAML entry's remaining keys as `kwargs`."""
    obj = resolve_type(kind, where)
    kwargs = dict(kwargs)
    try:
        if obj == "compute_score":
            function = kwargs.pop("function", None)
            if not function:
                raise UserError(f"{where}: type compute_score needs `function: pkg.module:compute_score`")
            return ComputeScoreComponent(load_object(function), kwargs, thread=bool(thread))
        if isinstance(obj, type) and issubclass(obj, RewardComponent):
            return obj(**kwargs)
        if isinstance(obj, RewardComponent):
            if kwargs:
                raise UserError(f"{where}: {kind} is a component instance and takes no options {sorted(kwargs)}")
            return obj
        if callable(obj):
            if is_compute_score(obj):
                return ComputeScoreComponent(obj, kwargs, thread=bool(thread))
            _check_kwargs(obj, kwargs, where)
            return FunctionComponent(obj, kwargs, thread=thread)
    except (TypeError, ValueError) as exc:
        raise UserError(f"{where} ({kind}): bad options: {exc}") from None
    raise UserError(f"{where}.type {kind!r} names {type(obj).__name__}, not a reward component or function")


def _check_kwargs(fn: Callable[..., Any], kwargs: dict[str, Any], where: str) -> None:
    """Fail at build time, not per trajectory, when a function does not accept the entry's keys."""
    try:
        inspect.signature(fn).bind(None, **kwargs)
    except TypeError as exc:
        raise UserError(f"{where}: options {sorted(kwargs)} do not fit {fn.__name__}: {exc}") from None
    except ValueError:
        pass


def _known() -> str:
    return (
        f"known types: {', '.join(known_types())}; or a dotted path to a component class or function "
        "(pkg.module:name or path/to/file.py:name)"
    )
