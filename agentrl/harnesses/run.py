"""Running a harness inside a task's container, against its gateway session.

The container has no network. The gateway also listens on a unix socket in a host folder mounted into the
container (`SOCKET_DIR`); `bridge.py`, uploaded into the container, forwards a port on the container's loopback to
that socket and runs the harness, which is told the session's URL on that port. The harness's own files come from
its volume (`agentrl.harnesses.install`), mounted read-only.
"""

from __future__ import annotations

import atexit
import os
import shlex
import shutil
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
    """The harness exited non-zero."""


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
    if result.exit_code != 0:
        out, err = result.stdout.strip()[-1500:], result.stderr.strip()[-1500:]
        raise HarnessFailed(f"{harness.name} exited with {result.exit_code}; stdout: {out!r}; stderr: {err!r}")
    return result.stdout[-RESULT_CHARS:]
