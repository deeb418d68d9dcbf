"""Copying a container's folder into another container, for forks: `tar` run inside both, the bytes relayed by us.

The engine's archive endpoints (`get_archive` / `put_archive`) copy too, but the engine starts a chrooted helper
for each call, which costs about twice as much as an `exec` of `tar` on a small repository (measured by
`benchmarks/fork.py`); a fork is on the critical path of a tree rollout, so it takes the cheaper way.
"""

from __future__ import annotations

import socket
import time
from typing import Any

from agentrl.sandbox.base import SandboxError


def read_folder(api: Any, container_id: str, folder: str) -> bytes:
    """The contents of `folder` in the container, as a tar stream (names relative to `folder`).

    Raises:
        SandboxError: `tar` failed in the container.
    """
    exec_id = api.exec_create(container_id, ["tar", "-C", folder, "-cf", "-", "."])["Id"]
    out, err = api.exec_start(exec_id, demux=True)
    code = _exit_code(api, exec_id)
    if code != 0:
        raise SandboxError(f"cannot copy {folder} out of {container_id[:12]} (tar exit {code}): {_text(err)}")
    return out or b""


class FolderWriter:
    """`tar -x` into `folder` of a container, started before the bytes it will read from its stdin are at hand (so
    that its start overlaps `read_folder`'s).

    Raises:
        docker.errors.DockerException: the exec could not start.
    """

    def __init__(self, api: Any, container_id: str, folder: str) -> None:
        self.api, self.container_id, self.folder = api, container_id, folder
        self.exec_id = api.exec_create(container_id, ["tar", "-C", folder, "-xf", "-"], stdin=True)["Id"]
        stream = api.exec_start(self.exec_id, socket=True)
        self._raw = getattr(stream, "_sock", stream)  # docker-py hands the hijacked connection wrapped in a SocketIO

    def write(self, data: bytes) -> None:
        """Unpack the tar stream `data` (from `read_folder`) and wait for `tar` to end.

        Raises:
            SandboxError: `tar` failed in the container.
        """
        try:
            self._raw.sendall(data)
            self._raw.shutdown(socket.SHUT_WR)  # end of stdin: tar finishes and the engine closes the stream
            output = b""
            while chunk := self._raw.recv(65536):
                output += chunk
        finally:
            self.close()
        code = _exit_code(self.api, self.exec_id)
        if code != 0:
            raise SandboxError(
                f"cannot copy files into {self.container_id[:12]}:{self.folder} (tar exit {code}): {_text(output)}"
            )

    def close(self) -> None:
        """Drop the connection (the exec's `tar` then ends on its own)."""
        self._raw.close()


def _exit_code(api: Any, exec_id: str, wait_s: float = 5.0) -> int | None:
    """The exec's exit code, waiting out the moment between its output's end and the engine recording it."""
    deadline = time.monotonic() + wait_s
    while (state := api.exec_inspect(exec_id))["Running"] and time.monotonic() < deadline:
        time.sleep(0.005)
    return state["ExitCode"]


def _text(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", errors="replace").strip()[-500:]
