"""Who owns a sandbox container, and removing them: at exit, on demand, and orphans of crashed runs.

Every container and volume carries the labels `agentrl.sandbox=1`, `agentrl.run`, `agentrl.host`, `agentrl.pid`
and `agentrl.pid_start`, so that `remove_orphans` can find those whose owning process is gone (the start time
guards against a reused pid).
"""

from __future__ import annotations

import atexit
import logging
import os
import socket
import threading
from pathlib import Path
from typing import Any

from agentrl.sandbox.base import SandboxError

logger = logging.getLogger(__name__)

LABEL = "agentrl.sandbox"
"""Label on every container and volume we create: `docker ps -a --filter label=agentrl.sandbox`."""

FORK_LABEL = "agentrl.fork"
"""Label on the images a fork of a task-image sandbox commits (and the containers started from them)."""

_live: dict[str, str | None] = {}
"""Container id -> volume name of the sandboxes this process owns, removed at exit."""
_live_images: list[str] = []
"""Fork images this process owns, oldest first, removed at exit (after the containers, newest first)."""
_live_lock = threading.Lock()
_atexit_registered = False


def _process_start(pid: int) -> str:
    """The start time of process `pid` (clock ticks since boot), or "" when unknown; guards against pid reuse."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[19]


def owner_labels(run_id: str) -> dict[str, str]:
    """The labels naming this process as the owner of a container."""
    pid = os.getpid()
    return {
        LABEL: "1",
        "agentrl.run": run_id,
        "agentrl.host": socket.gethostname(),
        "agentrl.pid": str(pid),
        "agentrl.pid_start": _process_start(pid),
    }


def _owner_alive(labels: dict[str, str]) -> bool:
    if labels.get("agentrl.host") != socket.gethostname():
        return True  # another machine's: not ours to judge
    try:
        pid = int(labels.get("agentrl.pid", ""))
    except ValueError:
        return False
    start = _process_start(pid)
    return bool(start) and start == labels.get("agentrl.pid_start", start)


def docker_client() -> Any:
    """A client of the local engine.

    Raises:
        SandboxError: the docker SDK is missing or no engine answers, saying what to do.
    """
    try:
        import docker
    except ImportError as exc:
        raise SandboxError("the docker SDK is not installed: pip install docker") from exc
    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as exc:
        raise SandboxError(f"no Docker engine answers ({exc}): start dockerd or use sandbox.backend=local") from exc
    return client


def remove_orphans(client: Any) -> int:
    """Remove our containers and volumes whose owning process (on this host) is gone; return how many containers."""
    removed = 0
    for container in client.containers.list(all=True, filters={"label": LABEL}, sparse=True):
        if not _owner_alive(container.attrs.get("Labels") or {}):
            remove_quietly(client, container.id, None)
            removed += 1
    for volume in client.volumes.list(filters={"label": LABEL}):
        if not _owner_alive(volume.attrs.get("Labels") or {}):
            remove_quietly(client, None, volume.name)
    for image in client.images.list(filters={"label": f"{FORK_LABEL}=1"}):
        if not _owner_alive(image.labels):
            remove_image_quietly(client, image.id, force=True)
    if removed:
        logger.warning("removed %d orphaned sandbox container(s) of crashed runs", removed)
    return removed


def remove_all(client: Any, run_id: str | None = None) -> int:
    """Remove every sandbox container and volume (of `run_id`, if given), whoever owns it; return the count."""
    label = [LABEL] + ([f"agentrl.run={run_id}"] if run_id else [])
    containers = client.containers.list(all=True, filters={"label": label}, sparse=True)
    for container in containers:
        remove_quietly(client, container.id, None)
    for volume in client.volumes.list(filters={"label": label}):
        remove_quietly(client, None, volume.name)
    return len(containers)


def remove_quietly(client: Any, container_id: str | None, volume: str | None) -> None:
    """Remove a container and/or volume; gone already is fine, other failures are logged."""
    import docker

    if container_id:
        try:
            client.api.remove_container(container_id, force=True, v=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if "already in progress" not in str(exc):
                logger.warning("removing sandbox container %s failed: %s", container_id[:12], exc)
    if volume:
        try:
            client.api.remove_volume(volume, force=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            logger.warning("removing sandbox volume %s failed: %s", volume, exc)


def remove_image_quietly(client: Any, image_id: str, force: bool = False) -> bool:
    """Remove an image; True when it is gone. An image still in use (a container, a child image) is left."""
    import docker

    try:
        client.api.remove_image(image_id, force=force, noprune=False)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:
        if exc.status_code != 409:  # 409: still used by a container or another fork's image
            logger.warning("removing fork image %s failed: %s", image_id[:19], exc)
        return False
    untrack_image(image_id)
    return True


def cleanup_live() -> int:
    """Remove every sandbox (and fork image) this process still owns (at exit, on SIGTERM); return how many
    containers."""
    with _live_lock:
        live = list(_live.items())
        images = _live_images[::-1]
        _live.clear()
        _live_images.clear()
    if not live and not images:
        return 0
    try:
        client = docker_client()
    except SandboxError:
        return 0
    for container_id, volume in live:
        remove_quietly(client, container_id, volume)
    for image_id in images:
        remove_image_quietly(client, image_id, force=True)
    client.close()
    return len(live)


def track(container_id: str, volume: str | None) -> None:
    """Remember a container (and its volume) this process owns, to remove it at exit."""
    global _atexit_registered
    with _live_lock:
        _live[container_id] = volume
        if not _atexit_registered:
            atexit.register(cleanup_live)
            _atexit_registered = True


def untrack(container_id: str) -> None:
    """Forget a container that was removed."""
    with _live_lock:
        _live.pop(container_id, None)


def track_image(image_id: str) -> None:
    """Remember a fork image this process owns, to remove it at exit."""
    with _live_lock:
        _live_images.append(image_id)


def untrack_image(image_id: str) -> None:
    """Forget a fork image that was removed."""
    with _live_lock:
        if image_id in _live_images:
            _live_images.remove(image_id)
