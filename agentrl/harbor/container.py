"""A task's container: started from its image as the task's author built it, with Harbor's paths.

The agent works in the image's WORKDIR (or `[environment].workdir`) as the image's user, with the files the
Dockerfile put there, so the container runs in `DockerSandbox`'s task-image mode: a writable root (the
container's own layer, removed with it) instead of agentrl's read-only root with a `/work` volume; no network
unless the task and `sandbox.network` both allow it; memory, CPU and process limits. `/logs/agent` and
`/logs/verifier` are created open to every user (the verifier writes its reward there); `/tests` and
`/solution` are copied in only when they are run, so the agent never sees them.

Hand-written rather than Harbor's `DockerEnvironment`: Harbor's runs docker compose, pulls images and is driven
by its own trial runner; agentrl's containers build offline, count against the sandbox pool and its cleanup, and
take the run's caps (`agentrl.harbor.limits`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import tempfile
from pathlib import Path
from typing import Any

from agentrl.harbor.images import image_workdir, task_image
from agentrl.harbor.limits import TaskLimits
from agentrl.harbor.task import HarborTask, HarborTaskError
from agentrl.sandbox.base import ExecResult, Sandbox
from agentrl.sandbox.docker import DockerSandbox

VERIFIER_LOGS = "/logs/verifier"
_TEMPLATE = re.compile(r"\$\{([^}:]+)(?::-(.*))?\}")


async def open_task_container(task: HarborTask, limits: TaskLimits, sandbox: Any, run_id: str) -> DockerSandbox:
    """Build (or reuse) the task's image and start its container; the caller closes it.

    Args:
        task: the task.
        limits: its limits (`agentrl.harbor.limits.task_limits`).
        sandbox: the run's `SandboxConfig` (process limit, command timeout, output cap).
        run_id: label of the container.

    Raises:
        HarborImageError: the image cannot be had (a missing base image, a failed build).
        SandboxError: the container cannot start.
    """
    image, workdir = await asyncio.to_thread(_image_and_workdir, task)
    container = await DockerSandbox.create(
        image,
        run_id=run_id,
        memory=f"{limits.memory_mb}m",
        cpus=limits.cpus,
        pids_limit=sandbox.pids_limit,
        network=limits.network,
        exec_timeout_s=sandbox.exec_timeout_s,
        max_output_bytes=sandbox.max_output_bytes,
        task_image=True,
    )
    try:
        container.workdir = limits.workdir or workdir
        await _make_open_folders(container, ["logs/agent", "logs/verifier"])
    except BaseException:
        await asyncio.shield(container.close())
        raise
    return container


async def open_task_container_shielded(task: HarborTask, limits: TaskLimits, sandbox: Any, run_id: str) -> Any:
    """`open_task_container`, shielded: a trajectory cancelled while its container starts still removes it."""
    opening = asyncio.ensure_future(open_task_container(task, limits, sandbox, run_id))
    try:
        return await asyncio.shield(opening)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await (await opening).close()
        raise


async def run_script(
    container: Sandbox, source: Path, dest: str, script: str, timeout_s: float, env: dict[str, str], log: str
) -> tuple[ExecResult, str]:
    """Copy the host folder `source` to `dest` (replacing what is there) and run `bash dest/script` in the
    workdir, its stdout and stderr going to the file `log`, as Harbor runs solve.sh and test.sh.

    Returns:
        The run's result and the end of its output (the last 8 KB of `log`).
    """
    quoted = shlex.quote(dest)
    await container.exec(f"rm -rf {quoted} && mkdir -p {quoted}", timeout=60)
    await container.upload_dir(source, dest)
    run = await container.exec(
        f"bash {shlex.quote(f'{dest}/{script}')} > {shlex.quote(log)} 2>&1", timeout=timeout_s, env=env or None
    )
    tail = await container.exec(f"tail -c 8192 {shlex.quote(log)}", timeout=30)
    return run, tail.stdout


def resolve_env(env: dict[str, str], where: str) -> dict[str, str]:
    """A task's `env` table with `${VAR}` / `${VAR:-default}` values read from this machine's environment.

    Raises:
        HarborTaskError: a variable without default is not set here.
    """
    out = {}
    for key, value in env.items():
        match = _TEMPLATE.fullmatch(value)
        if match is None:
            out[key] = value
        elif match.group(1) in os.environ:
            out[key] = os.environ[match.group(1)]
        elif match.group(2) is not None:
            out[key] = match.group(2)
        else:
            raise HarborTaskError(f"{where}: {key} needs the environment variable {match.group(1)}, which is not set")
    return out


def _image_and_workdir(task: HarborTask) -> tuple[str, str]:
    from agentrl.sandbox.images import _client

    client = _client()
    image = task_image(task, client)
    return image, image_workdir(client, image)


async def _make_open_folders(container: Sandbox, paths: list[str]) -> None:
    """Create folders under `/` (relative `paths`) that every user may write into, whoever the image's user is."""
    with tempfile.TemporaryDirectory(prefix="agentrl-harbor-") as tmp:
        for path in paths:
            folder = Path(tmp, path)
            folder.mkdir(parents=True, exist_ok=True)
            while folder != Path(tmp):
                folder.chmod(0o777)
                folder = folder.parent
        await container.upload_dir(tmp, "/")
