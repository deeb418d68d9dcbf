"""One place that turns a run's config into a ready `RolloutManager`: sandboxes, tools and the run config wired in.

`agentrl rollout`, `agentrl train` and `agentrl eval` all build their managers here, so a recipe's `tools:` and
`sandbox:` sections mean the same thing in every command:

```python
async with rollout_session(cfg, llm, tokenizer) as manager:
    trajectories = await manager.run(samples)
```

Loops that need more of the run than their `agent:` section (the Gymnasium loop reads `env:`, the SWE loop
`sandbox:`) find the whole config on `loop.run_config`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from agentrl.config.schema import AgentRLConfig, RolloutConfig
from agentrl.loops.local_session import local_rollout_session
from agentrl.loops.policy_clients import PolicyClients
from agentrl.loops.protocols import TokenGenerator, Tokenizer


@contextlib.asynccontextmanager
async def rollout_session(
    cfg: AgentRLConfig,
    llm: TokenGenerator,
    tokenizer: Tokenizer,
    rollout: RolloutConfig | None = None,
    show_progress: bool = False,
    run_id: str | None = None,
) -> AsyncIterator[Any]:
    """A manager for `cfg`: in this process (`rollout.workers=0`, see `local_rollout_session`), or spreading the
    trajectories over `rollout.workers` Ray actors (`agentrl.loops.distributed`) that reach the servers `llm`
    routes to. Both have `run`, `stream` and `with_rollout`."""
    router = getattr(llm, "router", None)
    if isinstance(llm, PolicyClients):  # several policies: each worker reaches every policy's servers
        router = {name: client.router for name, client in llm.clients.items()}
    if cfg.rollout.workers == 0 or router is None:
        async with local_rollout_session(cfg, llm, tokenizer, rollout, show_progress, run_id) as manager:
            yield manager
        return
    from agentrl.loops.distributed import distributed_rollout_session

    frozen = frozenset(llm.frozen) if isinstance(llm, PolicyClients) else frozenset()
    async with distributed_rollout_session(cfg, router, rollout, show_progress, run_id, frozen) as manager:
        yield manager


__all__ = ["local_rollout_session", "rollout_session"]
