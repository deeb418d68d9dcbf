"""Build a gymnasium env from `env:` config: a registered id through `gymnasium.make`, or a class by dotted path."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import load_env_creator
from gymnasium.wrappers import TimeLimit

from agentrl.config.schema import EnvConfig
from agentrl.errors import UserError
from agentrl.registry import import_object


def make_env(cfg: EnvConfig, kwargs: dict[str, Any] | None = None) -> gym.Env[Any, Any]:
    """A fresh env for one episode, limited to `cfg.max_steps` steps.

    Args:
        cfg: the `env:` config (`id` or `entry_point`, `kwargs`, `render_mode`, `max_steps`).
        kwargs: extra arguments merged over `cfg.kwargs` (e.g. a dataset row's own map).

    Raises:
        UserError: no env configured, an unknown id, or an entry point that does not build a `gymnasium.Env`.
    """
    merged = {**cfg.kwargs, **(kwargs or {})}
    if cfg.id:
        return _make_registered(cfg, merged)
    if cfg.entry_point:
        return _make_from_entry_point(cfg, merged)
    raise UserError("no environment configured: set env.id (e.g. FrozenLake-v1) or env.entry_point=pkg.mod:MyEnv")


def env_problems(cfg: EnvConfig) -> list[str]:
    """What is wrong with the `env:` section (empty if nothing), found without building the env: an id gymnasium
    does not know, an entry point that cannot be imported, an adapter that is not an `EnvAdapter`."""
    from agentrl.envs.adapter import load_adapter

    checks = [
        ("env.id", cfg.id, _spec),
        ("env.entry_point", cfg.entry_point, _callable),
        ("env.adapter", cfg.adapter, load_adapter),
    ]
    problems = []
    for key, value, check in checks:
        if not value:
            continue
        try:
            check(value)
        except UserError as exc:
            problems.append(str(exc) if str(exc).startswith(key) else f"{key}: {exc}")
    return problems


def _spec(env_id: str) -> Any:
    module, _, name = env_id.rpartition(":")
    if module:  # "package:Env-v0": importing the package registers its envs (as gymnasium.make does)
        import_object(f"{module}:__name__", "env.id")
    try:
        return gym.spec(name)
    except gym.error.Error as exc:
        raise UserError(
            f"env.id={env_id!r} is not a registered gymnasium env ({exc}); check the id, import the package "
            "that registers it with env.id=package:EnvId-v0, or set env.entry_point=pkg.mod:MyEnv instead"
        ) from None


def _callable(path: str, key: str = "env.entry_point") -> Any:
    factory = import_object(path, key)
    if not callable(factory):
        raise UserError(f"{key}={path} is not a class or function returning a gymnasium.Env")
    return factory


def env_name(cfg: EnvConfig) -> str:
    """A short name of the configured env: its id, or the entry point's last part."""
    if cfg.id:
        return cfg.id
    if cfg.entry_point:
        return cfg.entry_point.replace(":", ".").rsplit(".", 1)[-1]
    return "env"


def _make_registered(cfg: EnvConfig, kwargs: dict[str, Any]) -> gym.Env[Any, Any]:
    assert cfg.id is not None
    spec = _spec(cfg.id)
    metadata = getattr(load_env_creator(spec.entry_point), "metadata", {}) if isinstance(spec.entry_point, str) else {}
    render_mode = _render_mode(cfg, metadata)
    try:
        return gym.make(spec, max_episode_steps=cfg.max_steps, render_mode=render_mode, **kwargs)
    except TypeError as exc:
        raise UserError(f"gymnasium.make({cfg.id!r}) rejected env.kwargs {kwargs}: {exc}") from None


def _make_from_entry_point(cfg: EnvConfig, kwargs: dict[str, Any]) -> gym.Env[Any, Any]:
    assert cfg.entry_point is not None
    factory = _callable(cfg.entry_point)
    render_mode = _render_mode(cfg, getattr(factory, "metadata", {}))
    extra = {"render_mode": render_mode} if render_mode is not None else {}
    try:
        env = factory(**kwargs, **extra)
    except TypeError as exc:
        raise UserError(f"env.entry_point={cfg.entry_point} rejected env.kwargs {kwargs}: {exc}") from None
    if not isinstance(env, gym.Env):
        raise UserError(
            f"env.entry_point={cfg.entry_point} returned a {type(env).__name__}, not a gymnasium.Env; subclass "
            "gymnasium.Env (reset, step, observation_space, action_space)"
        )
    return TimeLimit(env, max_episode_steps=cfg.max_steps)


def _render_mode(cfg: EnvConfig, metadata: Any) -> str | None:
    modes = list(metadata.get("render_modes", [])) if isinstance(metadata, dict) else []
    if cfg.render_mode == "none":
        return None
    if "ansi" in modes:
        return "ansi"
    if cfg.render_mode == "ansi":
        raise UserError(
            f"env.render_mode=ansi, but {env_name(cfg)} renders only {modes or 'nothing'} (metadata['render_modes']); "
            "use env.render_mode=auto or none"
        )
    return None
