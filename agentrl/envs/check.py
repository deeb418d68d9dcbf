"""`check_env`: can this env be played through text? Verifies the adapter's round trip and reports every problem."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env as gymnasium_check_env

from agentrl.config.schema import EnvConfig
from agentrl.envs.adapter import EnvAdapter, adapter_class, env_label
from agentrl.envs.factory import make_env
from agentrl.envs.spaces import InvalidAction
from agentrl.errors import UserError

NOT_AN_ACTION = "%% this reply names no action %%"


class EnvCheckError(UserError):
    """`check_env` found problems; `problems` lists each, with its fix."""

    def __init__(self, env: str, problems: list[str]):
        self.problems = problems
        body = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"{env} cannot be played through text ({len(problems)} problem(s)):\n{body}")


@dataclass
class EnvCheckReport:
    """What `check_env` verified."""

    env: str
    first_message: str
    actions_checked: list[str] = field(default_factory=list)
    steps_played: int = 0


def check_env(
    env: str | EnvConfig | gym.Env[Any, Any],
    adapter: type[EnvAdapter] | str | None = None,
    seed: int = 0,
    max_actions: int = 16,
    max_steps: int = 20,
) -> EnvCheckReport:
    """Check that an env can be played through text, as the `gym` agent loop plays it.

    Runs gymnasium's own env checker, then checks the adapter: the instructions and observations are non-empty
    text, the same seed gives the same first observation, every action (or `max_actions` sampled ones) is written
    as text that parses back to the same action, a reply naming no action raises `InvalidAction` with feedback,
    and `max_steps` steps play through without error.

    Args:
        env: a registered env id, an `EnvConfig`, or an env instance (closed by the check).
        adapter: an `EnvAdapter` subclass or its dotted path; None: the one the loop would use.
        seed: the reset seed.
        max_actions: Discrete spaces up to this size are checked exhaustively, others on this many samples.
        max_steps: steps played with round-tripped actions.

    Raises:
        EnvCheckError: listing every problem found, each with what to fix.
    """
    if isinstance(env, str):
        env = EnvConfig(id=env)
    if isinstance(env, EnvConfig):
        adapter = adapter if adapter is not None else env.adapter
        instance = make_env(env)
    else:
        instance = env
    label = env_label(instance)
    problems: list[str] = []
    try:
        _gymnasium_checks(instance, problems)
        made = _make_adapter(instance, adapter, problems)
        if made is None:
            raise EnvCheckError(label, problems)
        report = EnvCheckReport(env=label, first_message="")
        _check_texts(made, seed, report, problems)
        _check_round_trip(made, seed, max_actions, report, problems)
        _check_play(made, seed, max_steps, report, problems)
    finally:
        instance.close()
    if problems:
        raise EnvCheckError(label, problems)
    return report


def _gymnasium_checks(env: gym.Env[Any, Any], problems: list[str]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            gymnasium_check_env(env.unwrapped, skip_render_check=True, skip_close_check=True)
        except Exception as exc:
            problems.append(f"gymnasium's env checker failed: {exc} (fix the env's reset/step/spaces)")


def _make_adapter(env: gym.Env[Any, Any], adapter: type[EnvAdapter] | str | None, problems: list[str]) -> Any:
    try:
        cls = adapter if isinstance(adapter, type) else adapter_class(env, adapter)
        return cls(env)
    except Exception as exc:
        problems.append(f"the adapter cannot be built: {exc}")
        return None


def _check_texts(adapter: EnvAdapter, seed: int, report: EnvCheckReport, problems: list[str]) -> None:
    instructions = _call(problems, "instructions()", adapter.instructions)
    if instructions is not None and not _is_text(instructions):
        problems.append(f"instructions() returned {instructions!r}; return the task and the reply form as text")
    first = _observe(adapter, seed, problems)
    first_rng = _rng_state(adapter.env)
    again = _observe(adapter, seed, problems)
    if first is not None and again is not None and first != again:
        problems.append(
            f"two resets with seed {seed} gave different observation texts ({first!r} vs {again!r}); seeds name "
            "the episodes of a dataset, so reset(seed) must be deterministic (use self.np_random in the env)"
        )
    elif first_rng != _rng_state(adapter.env):
        # Same text by chance (few distinct starts); the generator's state shows the seed was ignored.
        problems.append(
            f"two resets with seed {seed} left the env's random generator in different states; seeds name the "
            "episodes of a dataset, so reset(seed) must be deterministic (call super().reset(seed=seed) and use "
            "self.np_random in the env)"
        )
    report.first_message = f"{instructions}\n\n{first}"


def _observe(adapter: EnvAdapter, seed: int, problems: list[str]) -> str | None:
    obs, info = adapter.env.reset(seed=seed)
    text = _call(problems, "observation_text(obs, info) after reset", adapter.observation_text, obs, info)
    if text is not None and not _is_text(text):
        problems.append(f"observation_text(...) returned {text!r} after reset; return non-empty text")
        return None
    return text


def _check_round_trip(
    adapter: EnvAdapter, seed: int, max_actions: int, report: EnvCheckReport, problems: list[str]
) -> None:
    space = adapter.env.action_space
    for action in _actions(space, seed, max_actions):
        shown = _show(action)
        text = _call(problems, f"action_text({shown})", adapter.action_text, action)
        if text is None:
            continue
        if not _is_text(text):
            problems.append(f"action_text({shown}) returned {text!r}; return the reply that names this action")
            continue
        report.actions_checked.append(text)
        try:
            parsed = adapter.parse_action(text)
        except InvalidAction as exc:
            problems.append(
                f"action {shown} is written as {text!r}, which parse_action rejects ({exc}); make parse_action "
                "accept what action_text writes"
            )
            continue
        except Exception as exc:
            problems.append(f"parse_action({text!r}) raised {type(exc).__name__}: {exc}")
            continue
        if not space.contains(parsed) or not _same(parsed, action):
            problems.append(
                f"action {shown} is written as {text!r}, which parses back to {_show(parsed)}; parse_action must "
                f"return the same action, inside the action space {space}"
            )
    if not isinstance(space, spaces.Text):
        _check_rejects(adapter, problems)


def _check_rejects(adapter: EnvAdapter, problems: list[str]) -> None:
    try:
        parsed = adapter.parse_action(NOT_AN_ACTION)
    except InvalidAction as exc:
        if not str(exc).strip():
            problems.append("parse_action raised InvalidAction without a message; say what a valid reply looks like")
        return
    except Exception as exc:
        problems.append(
            f"parse_action({NOT_AN_ACTION!r}) raised {type(exc).__name__}: {exc}; raise InvalidAction with feedback "
            "naming the valid form, so the model is told instead of the episode crashing"
        )
        return
    problems.append(
        f"parse_action({NOT_AN_ACTION!r}) returned {_show(parsed)}; a reply naming no action must raise InvalidAction"
    )


def _check_play(adapter: EnvAdapter, seed: int, max_steps: int, report: EnvCheckReport, problems: list[str]) -> None:
    env = adapter.env
    space = env.action_space
    space.seed(seed)
    obs, info = env.reset(seed=seed)
    for _ in range(max_steps):
        action = space.sample()
        try:
            action = adapter.parse_action(adapter.action_text(action))
        except Exception:
            return  # the round-trip check has reported it
        obs, reward, terminated, truncated, info = env.step(action)
        report.steps_played += 1
        text = _call(problems, "step_text(...)", adapter.step_text, action, obs, float(reward), info)
        if text is not None and not _is_text(text):
            problems.append(f"step_text(...) returned {text!r}; return the message shown after a step")
            return
        if terminated or truncated:
            _call(problems, "is_success(...)", adapter.is_success, float(reward), bool(terminated), info)
            obs, info = env.reset()


def _actions(space: spaces.Space[Any], seed: int, limit: int) -> list[Any]:
    if isinstance(space, spaces.Discrete) and space.n <= limit:
        return [np.int64(space.start + i) for i in range(int(space.n))]
    space.seed(seed)
    return [space.sample() for _ in range(limit)]


def _call(problems: list[str], what: str, fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception as exc:
        problems.append(f"{what} raised {type(exc).__name__}: {exc}")
        return None


def _show(action: Any) -> str:
    """An action as plain Python text (numpy scalars and arrays without their numpy wrapper)."""
    if isinstance(action, np.ndarray | np.generic):
        return repr(action.tolist())
    return repr(action)


def _rng_state(env: gym.Env[Any, Any]) -> str:
    generator = getattr(env.unwrapped, "_np_random", None)
    return "" if generator is None else repr(generator.bit_generator.state)


def _is_text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray | np.generic) or isinstance(b, np.ndarray | np.generic):
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))
    return bool(a == b)
