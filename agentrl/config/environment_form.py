"""Which of the field's environment standards a run reads, in words (`agentrl config show` prints it first)."""

from __future__ import annotations

from typing import Any

from agentrl.config.schema import AgentRLConfig


def environment_form(cfg: AgentRLConfig) -> str:
    """The run's environment: its standard and the name the config gives it."""
    kwargs: dict[str, Any] = cfg.agent.kwargs
    if cfg.agent.name == "verifiers":
        return f"verifiers environment {kwargs.get('env_id')!r} (agent.kwargs.env_id)"
    if cfg.agent.name == "openenv":
        where = kwargs.get("env_dir") or kwargs.get("app") or kwargs.get("base_url")
        return f"OpenEnv environment {where!r} (agent.kwargs)"
    if cfg.agent.name == "textarena":
        return f"TextArena game {kwargs.get('env_id')!r} (agent.kwargs.env_id)"
    if cfg.data.reasoning_gym:
        return f"reasoning-gym dataset {cfg.data.reasoning_gym!r} (data.reasoning_gym)"
    if cfg.env.enabled:
        return f"Gymnasium environment {cfg.env.id or cfg.env.entry_point!r} (env.id or env.entry_point)"
    if cfg.agent.name.startswith("harbor"):
        reader = cfg.data.harbor_reader
        return f"Harbor task folders {cfg.data.train_files} (data.train_files), read by {reader!r} (data.harbor_reader)"
    return f"data files {cfg.data.train_files} played by agent loop {cfg.agent.name!r}"


__all__ = ["environment_form"]
