"""A `RolloutManager` in this process for a run's config: a sandbox per trajectory and the run's tools attached
(what `agentrl.loops.session.rollout_session` gives with `rollout.workers=0`, and what each rollout worker runs)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from agentrl.config.schema import AgentRLConfig, RolloutConfig
from agentrl.loops.manager import RolloutManager
from agentrl.loops.protocols import TokenGenerator, Tokenizer
from agentrl.loops.sandbox_setup import SandboxHooks, chain_hooks


@contextlib.asynccontextmanager
async def local_rollout_session(
    cfg: AgentRLConfig,
    llm: TokenGenerator,
    tokenizer: Tokenizer,
    rollout: RolloutConfig | None = None,
    show_progress: bool = False,
    run_id: str | None = None,
) -> AsyncIterator[RolloutManager]:
    """A `RolloutManager` for `cfg`, with a sandbox per trajectory (`sandbox.backend`) and the `tools:` attached.

    Args:
        cfg: the run's config.
        llm: the rollout client.
        tokenizer: the policy's tokenizer.
        rollout: sampling settings overriding `cfg.rollout` (evaluation uses greedy ones).
        show_progress: draw a progress bar.
        run_id: labels this run's sandbox containers (default: random).

    Every container started for the session is removed when the block exits, even on error.
    """
    hooks: list[Any] = []
    sandboxes = SandboxHooks(cfg.sandbox, run_id=run_id) if cfg.sandbox.backend != "none" else None
    if sandboxes is not None:
        hooks.append(sandboxes)
    if cfg.tools:
        from agentrl.loops.tool_setup import ToolHooks
        from agentrl.tools.registry import build_tools

        hooks.append(ToolHooks(build_tools(cfg.tools), cfg.agent, tokenizer, timeout_s=cfg.sandbox.exec_timeout_s))
    setup, teardown = chain_hooks(*hooks) if hooks else (None, None)
    manager = RolloutManager(
        llm,
        tokenizer,
        cfg.agent,
        rollout or cfg.rollout,
        setup_context=setup,
        teardown_context=teardown,
        show_progress=show_progress,
        run_config=cfg,
    )
    try:
        if sandboxes is not None:
            await sandboxes.start()
        yield manager
    finally:
        if sandboxes is not None:
            await sandboxes.close()


__all__ = ["local_rollout_session"]
