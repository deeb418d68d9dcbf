"""The task repository inside a sandbox: start a container from the task's image, put a writable copy of the
repository under `/work`, take the agent's diff out, apply patches.

A sandbox's root filesystem is read-only and only `/work` is writable, so the repository the image holds at
`repo_dir` (SWE-bench's `/testbed`) is copied to `/work/<name>` first, and `git` works on that copy. A task with a
`start_patch` (SWE-smith's bug) has it applied and committed there, and that commit is where the agent starts.
"""

from __future__ import annotations

import asyncio
import posixpath
import shlex
from typing import Any

from agentrl.sandbox.base import ExecResult, Sandbox, SandboxError
from agentrl.swe.task import SWETask

SCRATCH = "/work/.agentrl"
"""Where patches and reports go inside the sandbox (outside the repository)."""
START_PATCH = f"{SCRATCH}/start.patch"
GIT_IDENTITY = "-c user.name=agentrl -c user.email=agentrl@localhost"
IGNORED = ("__pycache__/", "*.pyc", ".pytest_cache/", "*.egg-info/", ".hypothesis/")
"""Kept out of the agent's diff: build and test by-products."""


def work_repo(task: SWETask) -> str:
    """Where the writable repository lives in the sandbox."""
    if task.repo_dir == "/work" or task.repo_dir.startswith("/work/"):
        return task.repo_dir
    return posixpath.join("/work", posixpath.basename(task.repo_dir.rstrip("/")) or "repo")


async def open_task_sandbox(
    task: SWETask, config: Any = None, run_id: str = "swe", mounts: list[Any] | None = None
) -> tuple[Sandbox, str]:
    """Start a container from the task's image with the repository ready at `work_repo(task)`.

    Returns the sandbox (its `workdir` is the repository; the caller closes it) and the sha of the commit the
    repository starts at.

    Args:
        task: the task (its `image` must exist locally).
        config: an `agentrl.config.SandboxConfig` (memory, cpus, limits, timeouts); None for the defaults.
        run_id: the run the container belongs to (a label).
        mounts: `agentrl.sandbox.container_options.ExtraMount`s beside `/work` (a harness, the gateway's socket).

    Raises:
        SandboxError: the image is missing, the container cannot start, or the repository cannot be prepared.
    """
    from agentrl.sandbox.docker import DockerSandbox

    if config is None:
        from agentrl.config.schema import SandboxConfig

        config = SandboxConfig(backend="docker")
    try:
        sandbox = await DockerSandbox.create(
            task.image,
            run_id=run_id,
            memory=config.memory,
            cpus=config.cpus,
            pids_limit=config.pids_limit,
            network=config.network,
            exec_timeout_s=config.exec_timeout_s,
            workdir_size=config.workdir_size,
            tmp_size=config.tmp_size,
            max_output_bytes=config.max_output_bytes,
            mounts=mounts,
        )
    except SandboxError as exc:
        raise_if_missing_image(task, exc)
        raise
    try:
        base = await prepare_repo(sandbox, task)
    except BaseException:
        await asyncio.shield(sandbox.close())
        raise
    return sandbox, base


def raise_if_missing_image(task: SWETask, exc: SandboxError) -> None:
    """Raise a `SandboxError` saying how to get the task's image when `exc` says it is missing."""
    if "No such image" in str(exc) or "not found" in str(exc).lower():
        from agentrl.swe.images import how_to_get

        raise SandboxError(f"image {task.image} of task {task.instance_id} is missing: {how_to_get(task)}") from exc


async def prepare_repo(sandbox: Sandbox, task: SWETask, timeout: float = 300.0) -> str:
    """Copy the repository to `/work`, check out `base_commit` when the copy is elsewhere, return HEAD's sha.

    Sets `sandbox.workdir` to the repository, so tools run there.

    Raises:
        SandboxError: the image has no repository at `repo_dir`, or not the task's `base_commit`.
    """
    dest = work_repo(task)
    q_src, q_dest = shlex.quote(task.repo_dir), shlex.quote(dest)
    excludes = "\\n".join(IGNORED)
    lines = [
        "set -e",
        f"test -d {q_src}/.git || {{ echo 'no git repository at {task.repo_dir}' >&2; exit 3; }}",
        f"if [ {q_src} != {q_dest} ]; then rm -rf {q_dest}; cp -a {q_src} {q_dest}; fi",
        f"cd {q_dest}",
        "git config --global --add safe.directory '*'",
        f"mkdir -p .git/info && printf '{excludes}\\n' >> .git/info/exclude",
    ]
    if task.base_commit:
        b = shlex.quote(task.base_commit)
        lines.append(f'[ "$(git rev-parse HEAD)" = {b} ] || git -c advice.detachedHead=false checkout -q -f {b}')
    if task.start_patch.strip():
        await sandbox.write_file(
            START_PATCH, task.start_patch if task.start_patch.endswith("\n") else task.start_patch + "\n"
        )
        lines += [
            f"git apply {START_PATCH} || {{ echo 'the start_patch does not apply to the image commit' >&2; exit 4; }}",
            f"git add -A && git {GIT_IDENTITY} -c commit.gpgsign=false commit -q --no-verify -m 'task start'",
        ]
    lines.append("git rev-parse HEAD")
    result = await sandbox.exec("\n".join(lines), timeout=timeout, workdir="/work")
    if not result.ok:
        raise SandboxError(
            f"cannot prepare the repository of {task.instance_id} from {task.repo_dir} in image {task.image} "
            f"(exit {result.exit_code}): {(result.stderr or result.stdout).strip()[-500:]}"
        )
    sandbox.workdir = dest
    head = result.stdout.strip().splitlines()
    if not head:  # seen once under load: the script exited 0 but its output came back empty; ask again
        again = await sandbox.exec("git rev-parse HEAD", timeout=timeout, workdir=dest)
        head = again.stdout.strip().splitlines()
        if not again.ok or not head:
            raise SandboxError(f"the repository of {task.instance_id} was prepared but its commit cannot be read")
    return head[-1]


async def extract_patch(sandbox: Sandbox, task: SWETask, base: str, timeout: float = 60.0) -> str:
    """The agent's changes as a diff against `base` (new files included, build by-products left out).

    Raises:
        SandboxError: git failed (the repository is broken or gone).
    """
    cmd = f"git add -A && git diff --cached --no-color --no-ext-diff {shlex.quote(base)}"
    result = await sandbox.exec(cmd, timeout=timeout, workdir=work_repo(task))
    if not result.ok:
        raise SandboxError(f"cannot extract the patch (exit {result.exit_code}): {result.stderr.strip()[-500:]}")
    if result.truncated:
        raise SandboxError("the patch is larger than the sandbox output cap (sandbox.max_output_bytes)")
    return result.stdout


async def apply_patch(sandbox: Sandbox, task: SWETask, patch: str, name: str, timeout: float = 60.0) -> ExecResult:
    """Apply a diff to the repository: `git apply`, then `patch --fuzz=5` as SWE-bench's harness falls back to."""
    path = f"{SCRATCH}/{name}.patch"
    await sandbox.write_file(path, patch if patch.endswith("\n") else patch + "\n")
    cmd = (
        f"git apply --verbose {path} 2>&1 || git apply --verbose --reject {path} 2>&1 "
        f"|| patch --batch --fuzz=5 -p1 -i {path} 2>&1"
    )
    return await sandbox.exec(cmd, timeout=timeout, workdir=work_repo(task))


async def restore_files(
    sandbox: Sandbox, task: SWETask, base: str, files: list[str], created: list[str], timeout: float = 60.0
) -> ExecResult:
    """Put `files` back as they are at `base`, and delete `created` (files the test patch will add), so that a
    model patch touching the test files cannot change the tests that grade it."""
    lines = [f"rm -f -- {shlex.quote(f)}" for f in created]
    b = shlex.quote(base)
    lines += [f"git checkout -q {b} -- {shlex.quote(f)} 2>/dev/null || true" for f in files if f not in created]
    return await sandbox.exec("\n".join(lines) or "true", timeout=timeout, workdir=work_repo(task))
