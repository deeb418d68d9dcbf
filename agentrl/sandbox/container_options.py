"""How a sandbox container is made: its user and workdir, its PID 1, its `/work` volume and the options of the
default (locked-down) and task-image containers. `DockerSandbox.create_sync` puts them together with the limits."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from agentrl.sandbox.containers import remove_quietly, untrack

UID = 1000
WORKDIR = "/work"

# PID 1: reap every child (orphans are re-parented here), forever. As a namespace's init it ignores the signals
# it has no handler for, SIGKILL included, so `kill -9 -1` inside the container leaves it standing.
REAPER = (
    "import os, time\n"
    "while True:\n"
    "    try:\n"
    "        os.wait()\n"
    "    except ChildProcessError:\n"
    "        time.sleep(0.2)\n"
)

# PID 1 of a task image, which may lack python3: `wait` reaps every child (orphans included); as the namespace's
# init the shell outlives `kill -9 -1`, and it exits on the SIGTERM of `docker stop`.
SHELL_REAPER = 'trap "exit 0" TERM; while :; do sleep 2 & wait; done'
TASK_CAPABILITIES = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID"]
"""What root in a task image may still do to the container's own files (chown, chmod, write other users' files,
switch user): Docker's default set without network, device, chroot and audit capabilities."""


@dataclass(frozen=True)
class ExtraMount:
    """A named volume or a host folder mounted into a sandbox beside `/work`: a harness's files (a volume, read-only)
    or the folder of the gateway's unix socket (the only way out of a container without network).

    Attributes:
        source: a volume's name, or an absolute host path.
        target: where it appears in the container.
        read_only: mounted read-only.
    """

    source: str
    target: str
    read_only: bool = True


def add_mounts(options: dict[str, Any], mounts: list[ExtraMount]) -> dict[str, Any]:
    """`options` with `mounts` added to its volumes."""
    volumes = dict(options.get("volumes") or {})
    volumes.update({m.source: {"bind": m.target, "mode": "ro" if m.read_only else "rw"} for m in mounts})
    return {**options, "volumes": volumes}


def discard_failed_start(client: Any, name: str, volume: str | None) -> None:
    """Remove what a failed start left behind (a created container, the volume)."""
    import docker

    leftover = []
    with contextlib.suppress(docker.errors.DockerException):
        leftover = client.containers.list(all=True, filters={"name": name}, sparse=True)
    remove_quietly(client, leftover[0].id if leftover else None, volume)
    for c in leftover:
        untrack(c.id)


def workdir_volume(client: Any, name: str, size: str, labels: dict[str, str]) -> str:
    """Create the size-capped tmpfs volume mounted at `/work`, owned by the sandbox user; returns its name."""
    client.volumes.create(
        name=name,
        driver="local",
        driver_opts={"type": "tmpfs", "device": "tmpfs", "o": f"size={size},uid={UID},gid={UID}"},
        labels=labels,
    )
    return name


def sandbox_options(volume: str, tmp_size: str, user: str, read_only: bool) -> dict[str, Any]:
    """The default container (uid 1000, read-only root), `/work` the tmpfs volume, a small `/tmp` tmpfs."""
    return {
        "command": ["python3", "-c", REAPER],
        "user": user,
        "working_dir": WORKDIR,
        "environment": {"HOME": WORKDIR, "LANG": "C.UTF-8"},
        "read_only": read_only,
        "tmpfs": {"/tmp": f"rw,nosuid,nodev,size={tmp_size},mode=1777"},
        "volumes": {volume: {"bind": WORKDIR, "mode": "rw"}},
    }


def task_image_options() -> dict[str, Any]:
    """A task image as its author built it: its own user, workdir and environment, a writable root."""
    return {"command": ["sh", "-c", SHELL_REAPER], "cap_add": TASK_CAPABILITIES}
