"""What a run with a harness (`agent.kwargs.harness`) must not set: checked at start with the rest of the run."""

from __future__ import annotations

from agentrl.config.schema import AgentRLConfig


def harness_problems(cfg: AgentRLConfig) -> list[str]:
    """A harness runs with its permission checks off (`--dangerously-skip-permissions`, Codex's
    `--dangerously-bypass-approvals-and-sandbox`) because its container has no network: `sandbox.network=true`
    would let the model's commands reach anything."""
    harness = cfg.agent.kwargs.get("harness")
    if harness is None or not cfg.sandbox.network:
        return []
    return [
        f"agent.kwargs.harness={harness} runs with its permission checks off because its container has no "
        "network, so it cannot run with sandbox.network=true: unset sandbox.network (the harness reaches the "
        "policy through the gateway without it)"
    ]
