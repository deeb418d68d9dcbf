"""Run SWE-bench's official evaluation of a patch in a fresh container of the task's image, as the package's
harness (`swebench.harness.run_evaluation.run_instance`) does: apply the model patch in `/testbed` with its chain of
apply commands, run the row's eval script (which resets the test files, applies the test patch, runs the test
command between the start and end markers), and grade its output with `agentrl.swe.official.grade_log`.

The container differs from agentrl's other sandboxes on purpose: the eval script runs as root on `/testbed` in a
writable root filesystem, as in the official harness. It has to: it installs into the image's conda env
(`pip install -e .`), generates locales, and the repository's editable install points the test environment at
`/testbed`, so running it on a copy under `/work` (as the agent's sandbox does) would import the unpatched code.
The container keeps the rest of the lock-down: no network, every capability dropped, memory, CPU and pid limits.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from agentrl.sandbox.base import Sandbox, SandboxError
from agentrl.swe.grade_result import MISSING, GradeResult
from agentrl.swe.official import eval_script, grade_log, spec_of
from agentrl.swe.repo import SCRATCH, raise_if_missing_image
from agentrl.swe.task import SWETask, TaskError

TESTBED = "/testbed"
"""Where SWE-bench's images hold the repository; its eval scripts `cd` there."""
PATCH = f"{SCRATCH}/model.patch"
SCRIPT = f"{SCRATCH}/eval.sh"
OUTPUT = f"{SCRATCH}/test_output.txt"
APPLY_TIMEOUT_S = 120.0


def apply_script(patch_path: str = PATCH) -> str:
    """Shell lines applying the model patch as the harness does: each of its `GIT_APPLY_CMDS` in turn on a clean
    tree, then a check that the patch is already applied; the harness's pass/fail line is echoed."""
    from swebench.harness.constants import APPLY_PATCH_FAIL, APPLY_PATCH_PASS
    from swebench.harness.run_evaluation import GIT_APPLY_CMDS

    lines = []
    for i, cmd in enumerate(GIT_APPLY_CMDS):
        if i:  # a failed attempt (--reject) leaves partial changes; the harness restarts from a clean tree
            lines.append("git checkout -- . ; git clean -fd")
        lines.append(f"{cmd} {patch_path} && {{ echo '{APPLY_PATCH_PASS}'; exit 0; }}")
    lines.append(f"git apply --check --reverse {patch_path} && {{ echo '{APPLY_PATCH_PASS}'; exit 0; }}")
    lines.append(f"echo '{APPLY_PATCH_FAIL}'; exit 1")
    return "\n".join(lines)


async def grade_official(
    task: SWETask,
    model_patch: str,
    *,
    config: Any = None,
    run_id: str = "swe-grade",
    timeout_s: float = 1800.0,
    skip_empty: bool = False,
) -> GradeResult:
    """Grade `model_patch` on `task` the official way, in a fresh container (removed afterwards, also on errors).

    Args:
        task: a task whose row carries swebench's `eval_script` (and whose image exists locally).
        model_patch: the agent's diff against the task's base commit.
        config: a `SandboxConfig` (memory, cpus, ...); None for the defaults.
        run_id: label of the container.
        timeout_s: limit of the eval script (a timeout is unresolved, as in the harness).
        skip_empty: score an empty patch unresolved without starting a container (the harness would run the
            unchanged tests, whose FAIL_TO_PASS fail by construction).

    Raises:
        TaskError: the row has no eval script, or needs binary assets (`image_assets`) fetched from the network.
        SandboxError: no container could be started (a missing image says how to get it).
    """
    started = time.perf_counter()
    script = eval_script(task)
    if spec_of(task).image_assets:
        raise TaskError(f"{task.instance_id}: its tests need binary files (image_assets) that SWE-bench's harness "
                        "downloads at grading time; agentrl grades offline and does not stage them")  # fmt: skip
    if not model_patch.strip() and skip_empty:
        f2p, p2p = dict.fromkeys(task.FAIL_TO_PASS, MISSING), dict.fromkeys(task.PASS_TO_PASS, MISSING)
        return GradeResult(task.instance_id, False, True, f2p, p2p, error="empty patch: nothing was changed")
    sandbox = await _open(task, config, run_id)
    try:
        result = await _evaluate(sandbox, task, model_patch, script, timeout_s)
    finally:
        await asyncio.shield(sandbox.close())
    result.duration_s = time.perf_counter() - started
    return result


async def _open(task: SWETask, config: Any, run_id: str) -> Sandbox:
    from agentrl.sandbox.docker import DockerSandbox

    if config is None:
        from agentrl.config.schema import SandboxConfig

        config = SandboxConfig(backend="docker")
    try:
        return await DockerSandbox.create(
            task.image, run_id=run_id, memory=config.memory, cpus=config.cpus, pids_limit=config.pids_limit,
            network=config.network, exec_timeout_s=config.exec_timeout_s, workdir_size=config.workdir_size,
            tmp_size=config.tmp_size, max_output_bytes=config.max_output_bytes, user="root", read_only=False,
        )  # fmt: skip
    except SandboxError as exc:
        raise_if_missing_image(task, exc)
        raise


async def _evaluate(sandbox: Sandbox, task: SWETask, patch: str, script: str, timeout_s: float) -> GradeResult:
    from swebench.harness.constants import TESTS_TIMEOUT

    await sandbox.write_file(PATCH, patch if patch.endswith("\n") else patch + "\n")
    await sandbox.write_file(SCRIPT, script)
    applied = await sandbox.exec(apply_script(), timeout=APPLY_TIMEOUT_S, workdir=TESTBED)
    if not applied.ok:
        f2p, p2p = dict.fromkeys(task.FAIL_TO_PASS, MISSING), dict.fromkeys(task.PASS_TO_PASS, MISSING)
        return GradeResult(task.instance_id, False, False, f2p, p2p, error="the model patch does not apply",
                           log=applied.stdout + applied.stderr)  # fmt: skip
    # One stream, in order, into a file: the markers (from `set -x`, on stderr) must stay around the tests' output,
    # and a long log must not meet the sandbox's output cap.
    run = await sandbox.exec(f"/bin/bash {SCRIPT} > {OUTPUT} 2>&1", timeout=timeout_s, workdir=TESTBED)
    try:
        log = (await sandbox.read_file(OUTPUT)).decode("utf-8", errors="replace")
    except FileNotFoundError:
        log = run.stdout + run.stderr
    if run.timed_out:
        log += f"\n{TESTS_TIMEOUT}: {timeout_s:g} seconds exceeded"
    result = grade_log(task, log)
    result.timed_out = run.timed_out
    if run.timed_out:
        result.error = "the test run timed out"
    return result
