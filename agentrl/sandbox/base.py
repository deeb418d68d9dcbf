"""The sandbox contract: where agent-written code runs, and what one command's run returns.

Every backend (`DockerSandbox`, `LocalSandbox`) implements `Sandbox`. A command that fails, hangs, runs out of
memory or forks without end is *data*: `exec` returns an `ExecResult` saying so. Only a broken sandbox (its
container gone, the engine unreachable) raises `SandboxError`, which the rollout manager records as the
trajectory's `sandbox_error` stop reason.
"""

from __future__ import annotations

import io
import posixpath
import tarfile
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

from agentrl.errors import ForkUnsupportedError, InfrastructureError

DEFAULT_MAX_OUTPUT_BYTES = 1 << 20
"""Bytes kept of each of stdout and stderr; the rest is dropped and marked."""


class SandboxError(InfrastructureError):
    """The sandbox itself failed (not the command run in it): it cannot be used any more."""


FORK_NOTE = "a fork copies the sandbox's files, not its processes: nothing left running in the parent runs in a child"
"""What a fork does not carry over; recorded in each forked trajectory's metadata (`fork`)."""


@dataclass
class ExecResult:
    """The outcome of one command.

    Attributes:
        exit_code: the command's exit status (137 when killed by SIGKILL, e.g. by the OOM killer or a timeout).
        stdout: standard output, decoded as UTF-8 (invalid bytes replaced), capped.
        stderr: standard error, likewise.
        timed_out: the command ran past its timeout and was killed with its whole process group.
        duration: wall-clock seconds of the call.
        truncated: stdout or stderr was cut to the output cap.
    """

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False
    duration: float = 0.0
    truncated: bool = False

    @property
    def ok(self) -> bool:
        """The command exited 0 in time."""
        return self.exit_code == 0 and not self.timed_out


class Sandbox(ABC):
    """A place to run commands and keep files for one trajectory.

    Relative paths are taken from `workdir`. All methods are coroutines; backends run blocking work in threads.
    """

    workdir: str = "/work"
    exec_timeout_s: float = 30.0
    """Timeout of `exec` calls that give none."""

    @abstractmethod
    async def exec(
        self,
        cmd: str,
        timeout: float | None = None,
        workdir: str | None = None,
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        """Run `cmd` with bash; return its result, also when it fails or times out.

        Raises:
            SandboxError: the sandbox is broken (not: the command failed).
        """

    @abstractmethod
    async def write_file(self, path: str, content: str | bytes, mode: int = 0o644) -> None:
        """Write a file, creating its parent folders."""

    @abstractmethod
    async def read_file(self, path: str) -> bytes:
        """Read a file.

        Raises:
            FileNotFoundError: no such file.
        """

    @abstractmethod
    async def upload_dir(self, local_dir: str | Path, dest: str | None = None) -> None:
        """Copy the contents of a host folder into the sandbox (at `dest`, default the workdir)."""

    @abstractmethod
    async def close(self) -> None:
        """Free the sandbox; calling it again does nothing."""

    async def fork(self, n: int) -> list[Sandbox]:
        """`n` new sandboxes, each holding this one's files as they are now, with its limits and labels; this one
        is unchanged. Processes are not carried over (`FORK_NOTE`). The caller closes the children.

        Raises:
            ForkUnsupportedError: this kind of sandbox cannot be forked.
            SandboxError: the sandbox, or a child's start, failed (no child is left running).
        """
        raise ForkUnsupportedError(f"{type(self).__name__} cannot be forked; use sandbox.backend=docker or local")

    async def prepare_forks(self, n: int) -> None:
        """Start, in the background, what `n` forks will need, so that a `fork` soon after does not wait for it (a
        Docker sandbox starts `n` containers of its image and options; the next `fork` fills them). Returns at
        once; what a fork does not use is freed with this sandbox. Does nothing for sandboxes with nothing to
        start."""
        return None

    def resolve(self, path: str) -> str:
        """`path` made absolute against the workdir."""
        return posixpath.normpath(posixpath.join(self.workdir, path))

    async def __aenter__(self) -> Sandbox:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def cap_bytes(data: bytes, dropped: int) -> str:
    """Decode kept output, noting how many bytes were dropped."""
    text = data.decode("utf-8", errors="replace")
    return f"{text}\n[... {dropped} more bytes dropped]" if dropped else text


def tar_of_file(name: str, content: bytes, mode: int = 0o644, uid: int = 0, gid: int = 0) -> bytes:
    """A tar archive holding one file `name` (may contain folders, which are added too)."""
    buf, now = io.BytesIO(), time.time()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        parts = name.strip("/").split("/")
        for i in range(1, len(parts)):
            info = tarfile.TarInfo("/".join(parts[:i]))
            info.type, info.mode, info.uid, info.gid, info.mtime = tarfile.DIRTYPE, 0o755, uid, gid, now
            tar.addfile(info)
        info = tarfile.TarInfo("/".join(parts))
        info.size, info.mode, info.uid, info.gid, info.mtime = len(content), mode, uid, gid, now
        tar.addfile(info, io.BytesIO(content))
    return buf.getvalue()


def tar_of_dir(local_dir: str | Path, uid: int = 0, gid: int = 0) -> bytes:
    """A tar archive of the contents of `local_dir` (symlinks kept as links), owned by `uid:gid`."""

    def owner(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid, info.gid, info.uname, info.gname = uid, gid, "", ""
        return info

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for child in sorted(Path(local_dir).iterdir()):
            tar.add(child, arcname=child.name, filter=owner)
    return buf.getvalue()
