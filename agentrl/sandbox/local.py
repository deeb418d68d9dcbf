"""`LocalSandbox`: commands in a temporary folder on the host — for development without Docker.

**It isolates nothing.** Commands run as you, with your network, your files and your limits; only the current
folder differs. Never point it at model output you do not trust; use `DockerSandbox` for training.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

from agentrl.sandbox.base import DEFAULT_MAX_OUTPUT_BYTES, ExecResult, Sandbox, SandboxError, cap_bytes


class LocalSandbox(Sandbox):
    """Runs commands with `bash -c` in a fresh temporary folder, which `close` deletes. NOT isolated: dev only.

    A timed-out command is killed with its whole process group (it runs in a session of its own).

    Args:
        exec_timeout_s: timeout of `exec` calls that give none.
        max_output_bytes: bytes kept of each of stdout and stderr.
    """

    def __init__(self, exec_timeout_s: float = 30.0, max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES) -> None:
        self.workdir = tempfile.mkdtemp(prefix="agentrl-local-sandbox-")
        self.exec_timeout_s = exec_timeout_s
        self.max_output_bytes = max_output_bytes
        self.closed = False

    async def exec(
        self,
        cmd: str,
        timeout: float | None = None,
        workdir: str | None = None,
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        self._check_open()
        timeout = self.exec_timeout_s if timeout is None else timeout
        start = time.monotonic()
        cwd = self.resolve(workdir or ".")
        if not os.path.isdir(cwd):
            return ExecResult(126, "", f"no such folder: {cwd}\n", duration=time.monotonic() - start)
        proc = await asyncio.create_subprocess_exec(
            "bash", "-c", cmd,
            cwd=cwd,
            env={**os.environ, "HOME": self.workdir, **(env or {})},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )  # fmt: skip
        reads = [asyncio.ensure_future(_read_capped(s, self.max_output_bytes)) for s in (proc.stdout, proc.stderr)]
        timed_out = False
        try:
            async with asyncio.timeout(timeout):  # not wait_for: on 3.11 it can drop a cancellation
                await proc.wait()
        except TimeoutError:
            timed_out = True
        finally:
            _kill_group(proc.pid)  # on timeout, and leftovers such as `cmd &` (also when cancelled)
        done, _ = await asyncio.wait(reads, timeout=5)
        (out, dropped_out), (err, dropped_err) = (r.result() if r in done else (b"", 0) for r in reads)
        for r in reads:
            r.cancel()
        await proc.wait()
        return ExecResult(
            exit_code=proc.returncode,
            stdout=cap_bytes(out, dropped_out),
            stderr=cap_bytes(err, dropped_err),
            timed_out=timed_out,
            duration=time.monotonic() - start,
            truncated=bool(dropped_out or dropped_err),
        )

    async def write_file(self, path: str, content: str | bytes, mode: int = 0o644) -> None:
        self._check_open()
        target = Path(self.resolve(path))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content.encode() if isinstance(content, str) else content)
        target.chmod(mode)

    async def read_file(self, path: str) -> bytes:
        self._check_open()
        target = Path(self.resolve(path))
        if target.is_dir():
            raise IsADirectoryError(f"{target} is a folder, not a file")
        if not target.exists():
            raise FileNotFoundError(f"no such file in the sandbox: {target}")
        return target.read_bytes()

    async def upload_dir(self, local_dir: str | Path, dest: str | None = None) -> None:
        self._check_open()
        shutil.copytree(local_dir, self.resolve(dest or "."), symlinks=True, dirs_exist_ok=True)

    async def fork(self, n: int) -> list[Sandbox]:
        """`n` new local sandboxes, each a copy of this one's folder (links kept as links)."""
        self._check_open()
        children = [LocalSandbox(self.exec_timeout_s, self.max_output_bytes) for _ in range(n)]
        for child in children:
            await asyncio.to_thread(shutil.copytree, self.workdir, child.workdir, symlinks=True, dirs_exist_ok=True)
        return list(children)

    async def close(self) -> None:
        if not self.closed:
            self.closed = True
            shutil.rmtree(self.workdir, ignore_errors=True)

    def _check_open(self) -> None:
        if self.closed:
            raise SandboxError("the local sandbox is closed")


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def _read_capped(stream: asyncio.StreamReader | None, cap: int) -> tuple[bytes, int]:
    """Read a stream to its end, keeping `cap` bytes; return them and the count of dropped bytes."""
    kept, dropped = bytearray(), 0
    while stream is not None and (chunk := await stream.read(65536)):
        room = max(cap - len(kept), 0)
        kept += chunk[:room]
        dropped += len(chunk) - min(len(chunk), room)
    return bytes(kept), dropped
