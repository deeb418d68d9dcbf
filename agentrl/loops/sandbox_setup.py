"""Give each trajectory a sandbox (`ctx.sandbox`) for the length of its run, and release it when it ends.

```python
sandbox_hooks = SandboxHooks(config.sandbox, run_id="run-42")   # backend: docker (a warm pool) or local
tool_hooks = ToolHooks(build_tools(config.tools), config.agent, tokenizer)
setup, teardown = chain_hooks(sandbox_hooks, tool_hooks)         # sandbox first: the ToolSet gets ctx.sandbox
manager = RolloutManager(llm, tokenizer, config.agent, config.rollout, setup_context=setup, teardown_context=teardown)
async with sandbox_hooks:                                        # warms the pool; removes every container at the end
    trajectories = await manager.run(samples)
```

A sandbox that cannot be had raises `SandboxError` from `setup`, which the RolloutManager records as the
trajectory's `sandbox_error` stop reason; the other trajectories go on.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any

from agentrl.loops.context import AgentContext
from agentrl.sandbox.base import Sandbox, SandboxError

SandboxFactory = Callable[[], Sandbox | Awaitable[Sandbox]]
Hook = Callable[[AgentContext], Any]


class SandboxHooks:
    """`setup_context` / `teardown_context` hooks of the RolloutManager: one sandbox per trajectory.

    * `sandbox.backend: docker`: a lease from a `SandboxPool` (warm containers, a cap, leak-proof cleanup);
      the pool is made on first use unless one is given, and closed by `close()` when this object made it.
    * `sandbox.backend: local`: a fresh `LocalSandbox` (a temporary folder; it isolates nothing, dev only).
    * `sandbox.backend: none`: nothing; `ctx.sandbox` stays None.

    Args:
        config: an `agentrl.config.SandboxConfig` (or None for its defaults).
        pool: a started or unstarted `SandboxPool` to lease from (docker backend); not closed by `close()`.
        factory: instead of the backend, a callable (sync or async) returning a `Sandbox`, closed at teardown.
        run_id: the run the pool's containers belong to (a label); default: a random id.
    """

    def __init__(
        self,
        config: Any = None,
        *,
        pool: Any = None,
        factory: SandboxFactory | None = None,
        run_id: str | None = None,
    ) -> None:
        if config is None:
            from agentrl.config.schema import SandboxConfig

            config = SandboxConfig(backend="docker" if pool is not None else "none")
        self.config = config
        self.run_id = run_id
        self.factory = factory
        self._pool = pool
        self._owns_pool = False
        self._active: dict[int, contextlib.AbstractAsyncContextManager | Sandbox] = {}
        """id(ctx) -> the pool lease (docker) or the sandbox (local, factory) to release at teardown."""

    @property
    def backend(self) -> str:
        return "factory" if self.factory is not None else self.config.backend

    @property
    def pool(self) -> Any:
        """The `SandboxPool` of the docker backend (made on first use)."""
        if self._pool is None:
            from agentrl.sandbox.pool import SandboxPool

            self._pool = SandboxPool(self.config, run_id=self.run_id)
            self._owns_pool = True
        return self._pool

    async def start(self) -> None:
        """Warm the pool (docker backend); optional, the first lease does it too.

        Raises:
            SandboxError: no Docker engine answers.
        """
        if self.backend == "docker":
            await self.pool.start()

    async def setup(self, ctx: AgentContext) -> None:
        """Set `ctx.sandbox` to a sandbox of the trajectory's own.

        Raises:
            SandboxError: no sandbox could be had (the trajectory ends with stop reason `sandbox_error`).
        """
        backend = self.backend
        if backend == "none":
            return
        started = time.perf_counter()
        key = id(ctx)
        if key in self._active:
            raise SandboxError("this trajectory already holds a sandbox (setup called twice)")
        if backend == "docker":
            lease = self.pool.lease(ctx.trajectory.id)
            sandbox = await lease.__aenter__()  # raises SandboxError when no container can be started
            self._active[key] = lease
        else:
            sandbox = await self._make(backend)
            self._active[key] = sandbox
        ctx.sandbox = sandbox
        timings = ctx.trajectory.timings
        timings["sandbox_setup_s"] = timings.get("sandbox_setup_s", 0.0) + time.perf_counter() - started

    async def _make(self, backend: str) -> Sandbox:
        try:
            if backend == "factory":
                made = self.factory()
                return await made if inspect.isawaitable(made) else made
            if backend == "local":
                from agentrl.sandbox.local import LocalSandbox

                cfg = self.config
                return LocalSandbox(exec_timeout_s=cfg.exec_timeout_s, max_output_bytes=cfg.max_output_bytes)
        except SandboxError:
            raise
        except Exception as exc:
            raise SandboxError(f"cannot create a sandbox ({backend}): {type(exc).__name__}: {exc}") from exc
        raise SandboxError(f"unknown sandbox backend {backend!r}; use docker, local or none")

    async def teardown(self, ctx: AgentContext) -> None:
        """Release the trajectory's sandbox (the pool discards the container); safe to call without setup."""
        held = self._active.pop(id(ctx), None)
        if held is None:
            return
        ctx.sandbox = None
        # shielded: a cancelled trajectory still gives its container back
        if isinstance(held, contextlib.AbstractAsyncContextManager):
            await asyncio.shield(held.__aexit__(None, None, None))
        else:
            await asyncio.shield(held.close())

    def stats(self) -> dict[str, int]:
        """Sandboxes held by running trajectories (and the pool's warm / leased counts, docker backend)."""
        out = {"held": len(self._active)}
        if self._pool is not None:
            out.update(self._pool.stats())
        return out

    async def close(self) -> None:
        """Release what trajectories still hold, and close the pool this object made."""
        for held in list(self._active.values()):
            with contextlib.suppress(Exception):
                if isinstance(held, contextlib.AbstractAsyncContextManager):
                    await held.__aexit__(None, None, None)
                else:
                    await held.close()
        self._active.clear()
        if self._pool is not None and self._owns_pool:
            await self._pool.close()

    async def __aenter__(self) -> SandboxHooks:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def chain_hooks(*hooks: Any) -> tuple[Hook, Hook]:
    """Combine hook objects (each with `setup` and/or `teardown`, sync or async) into one setup and one teardown.

    Setups run in the given order (a failure stops the rest and propagates); teardowns run in reverse order,
    every one of them even when another fails (the first error is raised afterwards, or an `ExceptionGroup` of
    all when several fail). A teardown may thus see a context whose setup never ran, and must allow for it.

    Returns:
        `(setup, teardown)`, for the RolloutManager's `setup_context` / `teardown_context`.
    """
    setups = [h.setup for h in hooks if getattr(h, "setup", None) is not None]
    teardowns = [h.teardown for h in reversed(hooks) if getattr(h, "teardown", None) is not None]

    async def setup(ctx: AgentContext) -> None:
        for fn in setups:
            await _maybe_await(fn(ctx))

    async def teardown(ctx: AgentContext) -> None:
        errors: list[Exception] = []
        for fn in teardowns:
            try:
                await _maybe_await(fn(ctx))
            except Exception as exc:
                errors.append(exc)
        if len(errors) == 1:
            raise errors[0]
        if errors:
            raise ExceptionGroup(f"{len(errors)} teardown hooks failed", errors)

    return setup, teardown


async def _maybe_await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value
