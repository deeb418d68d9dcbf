"""`BlockingSandbox`: a trajectory's sandbox for agent code that runs in a worker thread (sync agents)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from agentrl.sandbox.base import ExecResult, Sandbox

T = TypeVar("T")


class BlockingSandbox:
    """The same calls as `Sandbox`, blocking: each runs on the event loop that owns the sandbox.

    Call it from a worker thread only (never from the loop's own thread, which it would deadlock).

    Args:
        sandbox: the trajectory's sandbox.
        loop: the event loop it belongs to.
    """

    def __init__(self, sandbox: Sandbox, loop: asyncio.AbstractEventLoop) -> None:
        self.sandbox, self.loop = sandbox, loop

    @property
    def workdir(self) -> str:
        return self.sandbox.workdir

    def exec(
        self, cmd: str, timeout: float | None = None, workdir: str | None = None, env: dict[str, str] | None = None
    ) -> ExecResult:
        """Run `cmd` with bash in the sandbox (see `Sandbox.exec`)."""
        return self._wait(self.sandbox.exec(cmd, timeout=timeout, workdir=workdir, env=env))

    def write_file(self, path: str, content: str | bytes, mode: int = 0o644) -> None:
        self._wait(self.sandbox.write_file(path, content, mode))

    def read_file(self, path: str) -> bytes:
        return self._wait(self.sandbox.read_file(path))

    def _wait(self, coroutine: Coroutine[Any, Any, T]) -> T:
        if _running_loop() is self.loop:
            coroutine.close()
            raise RuntimeError(
                "BlockingSandbox was called on its event loop's own thread, where it would wait forever: "
                "call it from the agent's worker thread, or use the async sandbox (`await sandbox.exec(...)`)"
            )
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
