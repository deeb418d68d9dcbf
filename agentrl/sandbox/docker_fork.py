"""Forking a Docker sandbox: `n` containers holding its files now, with its limits and labels.

- A default sandbox can change only `/work` (its root is read-only): each child, a container started ahead by
  `DockerSandbox.prepare_forks` or now, gets a copy of it (`docker_copy`: `tar` in both containers, the reading and
  the children's `tar -x` started side by side).
- A task image's files live in the container's own layer: it is `docker commit`ted (paused meanwhile) into an
  image of ours (`FORK_LABEL`), which the children start from; the image is removed with the last container that
  uses it (`DockerSandbox.fork_images`), at exit, or as an orphan by the next run.

What the sandbox pool's jobs wait on runs in `side_pool`, never in that pool itself: 64 forks at once would each
wait on work queued behind them, for good.
"""

from __future__ import annotations

import contextlib
import functools
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from agentrl.sandbox.base import SandboxError
from agentrl.sandbox.container_options import WORKDIR
from agentrl.sandbox.containers import FORK_LABEL, remove_image_quietly, track_image
from agentrl.sandbox.docker_copy import FolderWriter, read_folder

DockerSandbox = Any  # agentrl.sandbox.docker.DockerSandbox, which imports this module (no import back)


@functools.cache
def thread_pool(name: str) -> ThreadPoolExecutor:
    """A pool of 64 threads named `name` for blocking SDK work, one per name, made on first use: the default pool
    (cpus + 4 threads) would serialize sandboxes."""
    return ThreadPoolExecutor(max_workers=64, thread_name_prefix=name)


def side_pool() -> ThreadPoolExecutor:
    """The pool for a fork's copy writers and the starts of containers prepared for forks."""
    return thread_pool("agentrl-sandbox-side")


def fork_by_copy(parent: DockerSandbox, n: int, container: Callable[[], DockerSandbox]) -> list[DockerSandbox]:
    """`n` containers (each from `container()`: a prepared one, or a new one), each given a copy of `parent`'s
    `/work`. Nothing is left running on failure.

    Raises:
        SandboxError: a container or the copy failed.
    """
    import docker

    api = parent._client.api
    children: list[DockerSandbox] = []
    writers: list[Future[FolderWriter]] = []
    try:
        for _ in range(n):
            children.append(container())
        writers = [side_pool().submit(FolderWriter, api, child.id, WORKDIR) for child in children]
        files = read_folder(api, parent.id, WORKDIR)
        for child, writer in zip(children, writers, strict=True):
            writer.result().write(files)
            child.workdir = parent.workdir
    except BaseException as exc:
        for writer in writers:
            with contextlib.suppress(Exception):
                writer.result().close()
        for child in children:
            child.close_sync()
        if isinstance(exc, docker.errors.DockerException | OSError):
            raise SandboxError(f"sandbox {parent.id[:12]} cannot be copied into its forks: {exc}") from exc
        raise
    return children


def fork_by_commit(parent: DockerSandbox, n: int, start: Callable[[str], DockerSandbox]) -> list[DockerSandbox]:
    """`n` containers started (`start(image)`) from an image committed from `parent`. Nothing is left on failure.

    Raises:
        SandboxError: the commit or a container failed.
    """
    import docker

    try:
        image = parent._client.api.commit(
            parent.id, repository="agentrl-fork", tag=uuid.uuid4().hex[:12], changes=[f"LABEL {FORK_LABEL}=1"]
        )["Id"]
    except docker.errors.DockerException as exc:
        raise SandboxError(f"sandbox {parent.id[:12]} cannot be committed for a fork: {exc}") from exc
    track_image(image)
    children: list[DockerSandbox] = []
    try:
        for _ in range(n):
            child = start(image)
            child.fork_images = [image, *parent.fork_images]
            child.workdir = parent.workdir
            children.append(child)
    except BaseException:
        for child in children:
            child.close_sync()
        remove_image_quietly(parent._client, image)
        raise
    return children
