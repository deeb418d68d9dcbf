"""`SandboxPool`: warm Docker sandboxes leased to trajectories, with a cap and leak-proof cleanup.

```python
pool = SandboxPool(config.sandbox, run_id="run-42")
await pool.start()                      # removes orphans of crashed runs, warms `pool_size` containers
async with pool.lease("traj-0") as sb:  # a warm container, or a fresh one; at most `max_containers` at once
    await sb.exec("python3 -V")
await pool.close()                      # removes every container of this pool
```

A released sandbox is discarded (a trajectory may have left anything in it) and the pool warms a replacement in
the background. Containers are removed on `close`, at interpreter exit (`atexit`), on SIGTERM, and — should the
process die harder — by `remove_orphans` at the next start, which finds them by their owner labels.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
import uuid
from collections.abc import AsyncIterator
from typing import Any

from agentrl.sandbox.base import SandboxError
from agentrl.sandbox.containers import cleanup_live, docker_client, remove_orphans
from agentrl.sandbox.docker import DockerSandbox

logger = logging.getLogger(__name__)

_sigterm_installed = False


def install_sigterm_cleanup() -> None:
    """On SIGTERM, remove this process's sandboxes before dying (atexit does not run on a bare SIGTERM).

    Only installed from the main thread and when SIGTERM has its default action (a framework's own handler is
    left alone; `atexit` still covers its orderly exit).
    """
    global _sigterm_installed
    if _sigterm_installed or threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def on_sigterm(signum: int, frame: Any) -> None:
        cleanup_live()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_sigterm)
    _sigterm_installed = True


class SandboxPool:
    """Warm containers of one image, leased one per trajectory.

    Args:
        config: an `agentrl.config.SandboxConfig` (image, pool_size, max_containers, memory, cpus, pids_limit,
            network, exec_timeout_s), or None for its defaults.
        run_id: the run the containers belong to (a label); default: a random id.
        client: a `docker.DockerClient`; default: one for the local engine.
        **sandbox_kwargs: more arguments of `DockerSandbox.create_sync` (e.g. `workdir_size`).
    """

    def __init__(self, config: Any = None, *, run_id: str | None = None, client: Any = None, **sandbox_kwargs: Any):
        if config is None:
            from agentrl.config.schema import SandboxConfig

            config = SandboxConfig()
        self.config = config
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self._client = client
        self._kwargs = {
            "run_id": self.run_id,
            "memory": config.memory,
            "cpus": config.cpus,
            "pids_limit": config.pids_limit,
            "network": config.network,
            "exec_timeout_s": config.exec_timeout_s,
            "workdir_size": config.workdir_size,
            "tmp_size": config.tmp_size,
            "max_output_bytes": config.max_output_bytes,
            **sandbox_kwargs,
        }
        self._warm: list[DockerSandbox] = []
        self._leased: dict[str, DockerSandbox] = {}
        self._slots = asyncio.Semaphore(config.max_containers)
        self._tasks: set[asyncio.Task] = set()
        self._started = False
        self._closed = False

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = docker_client()
        return self._client

    async def start(self) -> None:
        """Remove orphans of crashed runs, then warm `pool_size` containers."""
        if self._started:
            return
        self._started = True
        install_sigterm_cleanup()
        await asyncio.to_thread(remove_orphans, self.client)
        n = min(self.config.pool_size, self.config.max_containers)
        results = await asyncio.gather(*(self._create() for _ in range(n)), return_exceptions=True)
        for r in results:
            if isinstance(r, DockerSandbox):
                self._warm.append(r)
            else:
                logger.warning("warming a sandbox failed: %s", r)

    @contextlib.asynccontextmanager
    async def lease(self, trajectory_id: str) -> AsyncIterator[DockerSandbox]:
        """A sandbox for one trajectory, discarded when the block ends (also on errors and cancellation).

        Raises:
            SandboxError: no container could be started.
        """
        if self._closed:
            raise SandboxError("the sandbox pool is closed")
        await self.start()
        async with self._slots:
            sandbox = await self._take()
            self._leased[trajectory_id] = sandbox
            try:
                yield sandbox
            finally:
                self._leased.pop(trajectory_id, None)
                # discard, shielded so that a cancelled trajectory still frees its container
                await asyncio.shield(sandbox.close())
                if not self._closed:
                    self._refill()

    async def _take(self) -> DockerSandbox:
        while self._warm:
            sandbox = self._warm.pop()
            if await asyncio.to_thread(sandbox.healthy):
                return sandbox
            logger.warning("discarding unhealthy warm sandbox %s", sandbox.id[:12])
            await sandbox.close()
        return await self._create()

    async def _create(self) -> DockerSandbox:
        return await DockerSandbox.create(self.config.image, client=self.client, **self._kwargs)

    def _refill(self) -> None:
        """Warm one replacement in the background, while below `pool_size` and the cap."""
        alive = len(self._warm) + len(self._leased) + len(self._tasks)
        if len(self._warm) + len(self._tasks) >= self.config.pool_size or alive >= self.config.max_containers:
            return

        async def warm() -> None:
            try:
                sandbox = await self._create()
            except SandboxError as exc:
                logger.warning("warming a sandbox failed: %s", exc)
                return
            if self._closed:
                await sandbox.close()
            else:
                self._warm.append(sandbox)

        task = asyncio.get_running_loop().create_task(warm())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        """Remove every container of the pool, warm or leased; calling it again does nothing."""
        self._closed = True
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        sandboxes = self._warm + list(self._leased.values())
        self._warm, self._leased = [], {}
        await asyncio.gather(*(s.close() for s in sandboxes), return_exceptions=True)

    async def __aenter__(self) -> SandboxPool:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def stats(self) -> dict[str, int]:
        """Counts of warm and leased containers."""
        return {"warm": len(self._warm), "leased": len(self._leased)}
