"""`DockerSandbox`: one locked-down container per trajectory, driven through the docker SDK.

Each container runs as uid 1000 with every capability dropped, `no-new-privileges`, a read-only root
filesystem, no network (unless asked), and memory / CPU / process limits. Its workdir `/work` is a size-capped
tmpfs *volume* (so files move in and out with put/get archive, never by bind-mounting host paths) and `/tmp` a
small tmpfs. PID 1 is a tiny reaper, so killed processes never pile up as zombies against the pid limit.

Commands run as `timeout -k 1 T bash -c CMD`: `timeout` leads its own process group and kills the whole group
when time is up; what is left in the group when the command ends (`cmd &`) is killed as well. Should a stuck
call's processes escape the group, a host-side watchdog kills every process but PID 1. Either
way the caller gets an `ExecResult` with `timed_out=True` and the container stays usable.

With `task_image=True` the container is the task's image as its author built it (Harbor tasks,
`agentrl.harbor`): its files are edited in place, where its Dockerfile put them, by the image's own user. Its
root filesystem is then writable — the container's own layer, removed with it — since a read-only root with
tmpfs mounts cannot serve such tasks (Docker copies an image's files into a fresh volume only for plain disk
volumes, not tmpfs ones, and `put_archive` cannot reach into tmpfs mounts). No network, no new privileges,
memory / CPU / process limits, the timeouts and the watchdog stay as they are.

Containers are labelled with their owner and removed at exit or by the next run after a crash
(`agentrl.sandbox.containers`). Container options live in `container_options`, the command wrapper in `docker_exec`.
"""

from __future__ import annotations

import asyncio
import functools
import io
import logging
import posixpath
import tarfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

from agentrl.errors import ForkUnsupportedError
from agentrl.sandbox.base import (
    DEFAULT_MAX_OUTPUT_BYTES,
    ExecResult,
    Sandbox,
    SandboxError,
    tar_of_dir,
    tar_of_file,
)
from agentrl.sandbox.container_options import (
    UID,
    WORKDIR,
    ExtraMount,
    add_mounts,
    discard_failed_start,
    sandbox_options,
    task_image_options,
    workdir_volume,
)
from agentrl.sandbox.containers import (
    LABEL,
    cleanup_live,
    docker_client,
    owner_labels,
    remove_all,
    remove_image_quietly,
    remove_orphans,
    remove_quietly,
    track,
    untrack,
)
from agentrl.sandbox.docker_exec import KILL_GRACE_S, STOP_EXEC, WATCHDOG_GRACE_S, WRAPPER, CappedOutput
from agentrl.sandbox.docker_fork import fork_by_commit, fork_by_copy, side_pool, thread_pool
from agentrl.sandbox.images import BASE_IMAGE

logger = logging.getLogger(__name__)
T = TypeVar("T")


def _run_in_thread(fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
    """Run blocking SDK work in the sandbox pool."""
    return asyncio.get_running_loop().run_in_executor(thread_pool("agentrl-sandbox"), fn, *args)


def _close_orphans(forking: asyncio.Future[list[DockerSandbox]]) -> None:
    """Close the sandboxes of a fork whose caller was cancelled (Ctrl-C, a timeout) while the thread made them."""
    if forking.cancelled() or forking.exception() is not None:
        return
    for child in forking.result():
        thread_pool("agentrl-sandbox").submit(child.close_sync)


class DockerSandbox(Sandbox):
    """A sandbox in one locked-down container; build it with `DockerSandbox.create(...)`.

    Example:
        ```python
        async with await DockerSandbox.create(image="agentrl/sandbox:base") as sb:
            result = await sb.exec("echo hi", timeout=5)
        ```
    """

    workdir = WORKDIR

    def __init__(self, client: Any, container_id: str, volume: str | None, *, exec_timeout_s: float = 30.0,
                 max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES, image: str = BASE_IMAGE,
                 writable: str = WORKDIR) -> None:  # fmt: skip
        self._client = client
        self.id = container_id
        self.volume = volume
        self.image = image
        self.exec_timeout_s = exec_timeout_s
        self.max_output_bytes = max_output_bytes
        self.writable = writable
        """The folder files may be written under (`/` for a task image)."""
        self.closed = False
        self.started_with: dict[str, Any] = {}
        """The `create_sync` arguments it was started with (but the image and client): its forks get the same."""
        self.fork_images: list[str] = []
        """A fork of a task-image sandbox: the images committed for it and its ancestors' forks, its own first."""
        self._spares: list[Future[DockerSandbox]] = []
        """Containers `prepare_forks` is starting (or started) for the next forks."""

    @classmethod
    async def create(cls, image: str = BASE_IMAGE, **kwargs: Any) -> DockerSandbox:
        """Start a container; see `create_sync` for the arguments."""
        return await _run_in_thread(lambda: cls.create_sync(image, **kwargs))

    @classmethod
    def create_sync(
        cls,
        image: str = BASE_IMAGE,
        *,
        client: Any = None,
        run_id: str = "default",
        memory: str = "1g",
        cpus: float = 1.0,
        pids_limit: int = 256,
        network: bool = False,
        exec_timeout_s: float = 30.0,
        workdir_size: str = "512m",
        tmp_size: str = "64m",
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
        user: str = f"{UID}:{UID}",
        read_only: bool = True,
        task_image: bool = False,
        mounts: list[ExtraMount] | None = None,
    ) -> DockerSandbox:
        """Start a container (blocking).

        Args:
            image: the image, e.g. `agentrl/sandbox:base` or a recipe image layered on it.
            client: a `docker.DockerClient`; default: one for the local engine.
            run_id: the run the container belongs to (a label).
            memory: memory limit, swap included (e.g. "512m", "1g").
            cpus: CPU limit.
            pids_limit: most processes at once.
            network: give the container the default bridge network; off by default.
            exec_timeout_s: timeout of `exec` calls that give none.
            workdir_size: size cap of the `/work` tmpfs volume.
            tmp_size: size cap of the `/tmp` tmpfs.
            max_output_bytes: bytes kept of each of stdout and stderr.
            user: who commands run as; `root` only for images whose own scripts need it (SWE-bench's official
                grading), still with every capability dropped.
            read_only: mount the image's filesystem read-only (only `/work` and `/tmp` writable).
            task_image: run the image as its author built it (see the module docstring): writable root, the
                image's own user, workdir and `/tmp`, no `/work` volume.
            mounts: volumes or host folders mounted beside `/work` (a harness's files, the gateway's socket).

        Raises:
            SandboxError: the engine, the image or the container failed.
        """
        import docker

        client = client or docker_client()
        name = f"agentrl-sbx-{uuid.uuid4().hex[:12]}"
        labels = owner_labels(run_id)
        limits = {
            "network_mode": "bridge" if network else "none",
            "mem_limit": memory,
            "memswap_limit": memory,
            "nano_cpus": int(cpus * 1e9),
            "pids_limit": pids_limit,
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
            "labels": labels,
        }
        volume: str | None = None
        try:
            if not task_image:
                volume = workdir_volume(client, name, workdir_size, labels)
            options = task_image_options() if task_image else sandbox_options(name, tmp_size, user, read_only)
            options = add_mounts(options, mounts or [])
            container = client.containers.create(image, name=name, **options, **limits)
            track(container.id, volume)
            container.start()
        except docker.errors.DockerException as exc:
            discard_failed_start(client, name, volume)
            raise SandboxError(f"cannot start a sandbox from image {image!r}: {exc}") from exc
        sandbox = cls(client, container.id, volume, exec_timeout_s=exec_timeout_s, max_output_bytes=max_output_bytes,
                      image=image, writable="/" if task_image or not read_only else WORKDIR)  # fmt: skip
        sandbox.started_with = {
            "run_id": run_id, "memory": memory, "cpus": cpus, "pids_limit": pids_limit, "network": network,
            "exec_timeout_s": exec_timeout_s, "workdir_size": workdir_size, "tmp_size": tmp_size,
            "max_output_bytes": max_output_bytes, "user": user, "read_only": read_only, "task_image": task_image,
            "mounts": list(mounts or []),
        }  # fmt: skip
        return sandbox

    # -- commands -------------------------------------------------------------------------------------------

    async def exec(
        self,
        cmd: str,
        timeout: float | None = None,
        workdir: str | None = None,
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        timeout = self.exec_timeout_s if timeout is None else timeout
        tag = f"agentrl-exec-{uuid.uuid4().hex}"
        try:
            return await _run_in_thread(self._exec, cmd, timeout, workdir, env, tag)
        except asyncio.CancelledError:
            # the thread would otherwise wait the command out (a process exiting joins it first)
            await _run_in_thread(self._stop_exec, tag)
            raise

    def exec_sync(
        self, cmd: str, timeout: float, workdir: str | None = None, env: dict[str, str] | None = None
    ) -> ExecResult:
        """`exec`, blocking."""
        return self._exec(cmd, timeout, workdir, env, "agentrl-exec")

    def _exec(self, cmd: str, timeout: float, workdir: str | None, env: dict[str, str] | None, tag: str) -> ExecResult:
        import docker

        self._check_open()
        argv = ["bash", "-c", WRAPPER, tag, cmd, f"{timeout:g}", f"{KILL_GRACE_S:g}"]
        api = self._client.api
        start = time.monotonic()
        try:
            exec_id = api.exec_create(self.id, argv, environment=env or None, workdir=self.resolve(workdir or "."))
            stream = api.exec_start(exec_id["Id"], stream=True, demux=True)
        except docker.errors.DockerException as exc:
            raise SandboxError(f"sandbox {self.id[:12]} cannot run commands: {exc}") from exc
        fired = threading.Event()

        def watchdog() -> None:
            fired.set()
            self._kill_all()

        timer = threading.Timer(timeout + KILL_GRACE_S + WATCHDOG_GRACE_S, watchdog)
        timer.daemon = True
        timer.start()
        out, err = CappedOutput(self.max_output_bytes), CappedOutput(self.max_output_bytes)
        try:
            for chunk_out, chunk_err in stream:
                out.add(chunk_out)
                err.add(chunk_err)
            code = api.exec_inspect(exec_id["Id"])["ExitCode"]
        except docker.errors.DockerException as exc:
            raise SandboxError(f"sandbox {self.id[:12]} failed while running a command: {exc}") from exc
        finally:
            timer.cancel()
        duration = time.monotonic() - start
        code = -1 if code is None else code
        timed_out = fired.is_set() or (code in (124, 137) and duration >= timeout)
        return ExecResult(code, out.text(), err.text(), timed_out, duration, out.dropped > 0 or err.dropped > 0)

    def _stop_exec(self, tag: str) -> None:
        """Kill the command of the exec tagged `tag` (and its process group)."""
        try:
            api = self._client.api
            api.exec_start(api.exec_create(self.id, ["bash", "-c", STOP_EXEC, "agentrl-stop", tag])["Id"])
        except Exception as exc:
            logger.warning("sandbox %s: stopping a cancelled command failed: %s", self.id[:12], exc)

    def _kill_all(self) -> None:
        """Kill every process in the container but PID 1 (which ignores it)."""
        try:
            api = self._client.api
            api.exec_start(api.exec_create(self.id, ["bash", "-c", "kill -9 -1"])["Id"])
        except Exception as exc:
            logger.warning("sandbox %s: killing runaway processes failed: %s", self.id[:12], exc)

    # -- files ----------------------------------------------------------------------------------------------

    async def write_file(self, path: str, content: str | bytes, mode: int = 0o644) -> None:
        await _run_in_thread(self.write_file_sync, path, content, mode)

    def write_file_sync(self, path: str, content: str | bytes, mode: int = 0o644) -> None:
        """`write_file`, blocking."""
        data = content.encode() if isinstance(content, str) else content
        full = self.resolve(path)
        parent, name = posixpath.split(full)
        self._put(parent, tar_of_file(name, data, mode, UID, UID))

    async def read_file(self, path: str) -> bytes:
        return await _run_in_thread(self.read_file_sync, path)

    def read_file_sync(self, path: str) -> bytes:
        """`read_file`, blocking."""
        import docker

        self._check_open()
        full = self.resolve(path)
        try:
            chunks, _stat = self._client.api.get_archive(self.id, full)
            data = b"".join(chunks)
        except docker.errors.NotFound as exc:
            raise FileNotFoundError(f"no such file in the sandbox: {full}") from exc
        except docker.errors.DockerException as exc:
            raise SandboxError(f"sandbox {self.id[:12]} cannot read {full}: {exc}") from exc
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            member = tar.next()
            if member is None or member.isdir():
                raise IsADirectoryError(f"{full} is a folder, not a file")
            f = tar.extractfile(member)
            if f is None:
                raise FileNotFoundError(f"{full} is not a regular file (a link or device?)")
            return f.read()

    async def upload_dir(self, local_dir: str | Path, dest: str | None = None) -> None:
        await _run_in_thread(self.upload_dir_sync, local_dir, dest)

    def upload_dir_sync(self, local_dir: str | Path, dest: str | None = None) -> None:
        """`upload_dir`, blocking."""
        self._put(self.resolve(dest or "."), tar_of_dir(local_dir, UID, UID))

    def _put(self, folder: str, archive: bytes) -> None:
        import docker

        self._check_open()
        root = self.writable.rstrip("/")
        if folder != self.writable and not folder.startswith(root + "/"):
            raise PermissionError(f"files can only be written under {self.writable}, not {folder} (read-only)")
        try:
            try:
                self._client.api.put_archive(self.id, folder, archive)
            except docker.errors.NotFound:
                made = self.exec_sync(f"mkdir -p -- '{folder}'", timeout=10)
                if not made.ok:
                    raise SandboxError(f"cannot create {folder} in the sandbox: {made.stderr.strip()}") from None
                self._client.api.put_archive(self.id, folder, archive)
        except docker.errors.DockerException as exc:
            raise SandboxError(f"sandbox {self.id[:12]} cannot write into {folder}: {exc}") from exc

    # -- forks ----------------------------------------------------------------------------------------------

    async def fork(self, n: int) -> list[Sandbox]:
        forking = _run_in_thread(self.fork_sync, n)
        try:
            return list(await asyncio.shield(forking))
        except asyncio.CancelledError:  # the thread goes on forking: close what it makes, not at exit but now
            forking.add_done_callback(_close_orphans)
            raise

    async def prepare_forks(self, n: int) -> None:
        """Start `n` containers of this sandbox's image and options in the background, for the next `fork` to fill
        with this sandbox's files instead of starting its own (a container start, ~0.2 s here, leaves the fork's
        critical path); those unused are removed when this sandbox closes."""
        self._check_open()
        if self.started_with.get("task_image") or self.writable != WORKDIR:
            return  # a task image forks from an image committed at the fork; a writable root does not fork
        for _ in range(n - len(self._spares)):
            start = functools.partial(DockerSandbox.create_sync, self.image, client=self._client, **self.started_with)
            self._spares.append(side_pool().submit(start))

    def fork_sync(self, n: int) -> list[DockerSandbox]:
        """`fork`, blocking: `n` containers of the same image, limits and labels, each holding this one's files:
        a copy of `/work` for a default sandbox (its root is read-only, and `/tmp` is scratch that is not carried
        over), an image committed from it for a task image (`agentrl.sandbox.docker_fork`)."""
        self._check_open()

        def start(image: str) -> DockerSandbox:
            return DockerSandbox.create_sync(image, client=self._client, **self.started_with)

        if self.started_with.get("task_image"):
            return fork_by_commit(self, n, start)
        if self.writable != WORKDIR:
            raise ForkUnsupportedError(
                f"sandbox {self.id[:12]} has a writable root but is not a task image, which a fork does not copy: "
                "fork default sandboxes and task images only"
            )
        return fork_by_copy(self, n, lambda: self._spare() or start(self.image))

    def _spare(self) -> DockerSandbox | None:
        """A container `prepare_forks` started, or None (none prepared, or its start failed: the fork starts one)."""
        while self._spares:
            try:
                return self._spares.pop(0).result()
            except Exception as exc:
                logger.warning("sandbox %s: a container prepared for a fork failed to start: %s", self.id[:12], exc)
        return None

    # -- lifecycle ------------------------------------------------------------------------------------------

    def healthy(self) -> bool:
        """The container is running and answers a trivial command."""
        if self.closed:
            return False
        try:
            return self.exec_sync("true", timeout=10).ok
        except SandboxError:
            return False

    async def close(self) -> None:
        await _run_in_thread(self.close_sync)

    def close_sync(self) -> None:
        """`close`, blocking."""
        if self.closed:
            return
        self.closed = True
        untrack(self.id)
        remove_quietly(self._client, self.id, self.volume)
        for image in self.fork_images:  # its own first: an ancestor is free only once its descendants are gone
            if not remove_image_quietly(self._client, image):
                break
        while (spare := self._spare()) is not None:
            spare.close_sync()

    def _check_open(self) -> None:
        if self.closed:
            raise SandboxError(f"sandbox {self.id[:12]} is closed")

    def __repr__(self) -> str:
        return f"DockerSandbox(id={self.id[:12]!r}, image={self.image!r})"


__all__ = ["LABEL", "DockerSandbox", "cleanup_live", "docker_client", "owner_labels", "remove_all", "remove_orphans"]
