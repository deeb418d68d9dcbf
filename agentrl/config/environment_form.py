"""The run's environment in words, as its config names it (`agentrl config show` prints it first).

A loop that reads an environment standard of its own (verifiers, OpenEnv, TextArena, Harbor) describes it itself
(`AgentLoopBase.environment_form`); this is the description of everything else, and the loops' default.
"""

from __future__ import annotations

from agentrl.config.schema import AgentRLConfig


def environment_form(cfg: AgentRLConfig) -> str:
    """The run's reasoning-gym dataset, Gymnasium environment or data files, and the keys that name them."""
    if cfg.data.reasoning_gym:
        return f"reasoning-gym dataset {cfg.data.reasoning_gym!r} (data.reasoning_gym)"
    if cfg.env.enabled:
        return f"Gymnasium environment {cfg.env.id or cfg.env.entry_point!r} (env.id or env.entry_point)"
    return f"data files {cfg.data.train_files} played by agent loop {cfg.agent.name!r}"


__all__ = ["environment_form"]
