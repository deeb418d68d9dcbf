"""Running a harness inside a task's container, against its gateway session.

The container has no network. The gateway also listens on a unix socket in a host folder mounted into the
container (`SOCKET_DIR`); `bridge.py`, uploaded into the container, forwards a port on the container's loopback to
that socket and runs the harness, which is told the session's URL on that port. The harness's own files come from
its volume (`agentrl.harnesses.install`), mounted read-only.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shlex
import shutil
import signal
import tempfile
from pathlib import Path

from agentrl.harnesses.spec import HOME, Harness, Launch
from agentrl.sandbox.base import Sandbox
from agentrl.sandbox.container_options import ExtraMount

BRIDGE_PORT = 8787
SOCKET_DIR = "/run/agentrl"
"""Where the folder of the gateway's socket appears in the container."""
SOCKET_NAME = "gateway.sock"
BRIDGE = "/work/.agentrl/bridge.py"
RESULT_CHARS = 20_000
"""Stdout of a harness kept as its result, at most (the tail)."""


class HarnessFailed(RuntimeError):
    """The harness exited non-zero, or was stopped from outside (its exec timed out, a signal killed it).

    Attributes:
        exit_code: its exit status (128 + N, or -N, when signal N killed it).
        timed_out: its exec ran past the harness's timeout and was stopped.
    """

    def __init__(self, message: str, exit_code: int, timed_out: bool = False) -> None:
        super().__init__(message)
        self.exit_code, self.timed_out = exit_code, timed_out

    @property
    def gave_up(self) -> bool:
        """It ended itself with an error (exit 1-125): not timed out, not killed by a signal (the out-of-memory
        killer's is SIGKILL, 137), not unable to start (126, 127)."""
        return not self.timed_out and 0 < self.exit_code < 126


def harness_socket_dir() -> str:
    """A new host folder for a gateway's unix socket (removed at exit), readable by the containers' user."""
    folder = tempfile.mkdtemp(prefix="agentrl-gateway-")
    os.chmod(folder, 0o755)
    atexit.register(shutil.rmtree, folder, True)
    return folder


def harness_mounts(harness: Harness, socket_dir: str) -> list[ExtraMount]:
    """What a container running `harness` mounts: its files, and the folder of the gateway's socket."""
    return [ExtraMount(harness.volume, harness.home), ExtraMount(socket_dir, SOCKET_DIR)]


def session_url(session_id: str) -> str:
    """A session's `.../v1` URL as the harness sees it, on the container's loopback."""
    return f"http://127.0.0.1:{BRIDGE_PORT}/s/{session_id}/v1"


async def run_harness(
    harness: Harness,
    sandbox: Sandbox,
    launch: Launch,
    timeout_s: float,
    workdir: str | None = None,
    env: dict[str, str] | None = None,
) -> str:
    """Run `harness` for `launch` in `sandbox` (its working directory `workdir`, `env` added to its own
    environment); returns the tail of its stdout.

    Raises:
        HarnessFailed: it exited non-zero (its stderr's tail in the message).
    """
    files = {BRIDGE: (Path(__file__).parent / "bridge.py").read_text(), **harness.setup(harness, launch)}
    for path, text in files.items():
        await sandbox.write_file(path, text)
    argv = ["python3", BRIDGE, str(BRIDGE_PORT), f"{SOCKET_DIR}/{SOCKET_NAME}", *harness.command(harness, launch)]
    command = f"mkdir -p {shlex.quote(HOME)} && exec {shlex.join(argv)}"
    environment = {**harness.env(harness, launch), **(env or {})}
    result = await sandbox.exec(command, timeout=timeout_s, workdir=workdir, env=environment)
    if not result.ok:
        out, err = result.stdout.strip()[-1500:], result.stderr.strip()[-1500:]
        ending = _ending(result.exit_code, result.timed_out, timeout_s)
        raise HarnessFailed(
            f"{harness.name} {ending}; stdout: {out!r}; stderr: {err!r}", result.exit_code, result.timed_out
        )
    return result.stdout[-RESULT_CHARS:]


def _ending(exit_code: int, timed_out: bool, timeout_s: float) -> str:
    """How a harness's run ended, in words."""
    if timed_out:
        return f"timed out after {timeout_s:g} s and was stopped (exit {exit_code})"
    number = -exit_code if exit_code < 0 else exit_code - 128 if exit_code > 128 else 0
    with contextlib.suppress(ValueError):
        if number:
            name = signal.Signals(number).name
            why = ": out of memory, or killed" if number == signal.SIGKILL else ""
            return f"was killed by {name}{why} (exit {exit_code})"
    return f"exited with {exit_code}"
