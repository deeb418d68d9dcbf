"""Grade a patch the SWE-bench way: in a *fresh* container of the task's image, apply the model patch, then the
test patch, run the tests, and call the task resolved when every FAIL_TO_PASS and PASS_TO_PASS test passes.

```python
result = await grade_patch(task, model_patch)          # GradeResult
result.resolved, result.f2p_fraction, result.details()
```

Two graders, chosen per row, never guessed (`grader_of`):

* `swebench`: the official package's eval script, log parser and grading (`agentrl.swe.official_run`);
* `pytest`: agentrl's own run, below: pytest over the test files with a JUnit report (the bundled tasks, custom
  repositories).

Results are cached by (task, patch) for the process: a GRPO group's identical patches (often all empty) and two
reward components reading the same grading cost one container run.
"""

from __future__ import annotations

import asyncio
import hashlib
import shlex
import sys
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from agentrl.sandbox.base import SandboxError
from agentrl.swe.grade_result import MISSING, GradeResult
from agentrl.swe.repo import SCRATCH, apply_patch, open_task_sandbox, restore_files, work_repo
from agentrl.swe.report import Outcome, files_of_tests, new_files, parse_junit, patch_files
from agentrl.swe.task import SWETask, TaskError

REPORT = f"{SCRATCH}/report.xml"
TEST_COMMAND = (
    "python3 -m pytest -q -p no:cacheprovider -o addopts='' -o junit_family=xunit1 --rootdir=. "
    "--junitxml={report} {files}"
)
"""The test run: pytest over the test files, with its own addopts off (coverage plugins are not installed)."""


def pytest_command(task: SWETask, files: list[str]) -> str:
    """The shell command running `files` with a JUnit report at `REPORT` (after the task's env setup)."""
    run = TEST_COMMAND.format(report=REPORT, files=" ".join(shlex.quote(f) for f in files))
    setup = task.setup_script
    return f"{setup}\n{run}" if setup else run


def files_to_run(task: SWETask) -> list[str]:
    """The test files to run: those the test patch touches (as SWE-bench does), plus those of the test ids."""
    return list(dict.fromkeys([*patch_files(task.test_patch), *files_of_tests(task.tests)]))


def grader_of(task: SWETask) -> str:
    """How the task is graded: its `grader` (the row's column, or `extra_info.grader`) when it names one; else
    `swebench` for a row in SWE-bench's format (named, or all its columns) whose log parser the package has; else
    `pytest` (agentrl's own tasks, SWE-Gym, SWE-smith, custom repositories)."""
    if task.grader:
        return task.grader
    if task.row_format == "swe-bench":
        from agentrl.swe.official import knows

        if knows(task):
            return "swebench"
    return "pytest"


async def grade_patch(
    task: SWETask,
    model_patch: str,
    *,
    config: Any = None,
    run_id: str = "swe-grade",
    timeout_s: float = 300.0,
    skip_empty: bool = False,
) -> GradeResult:
    """Grade `model_patch` on `task` in a fresh container (removed afterwards, also on errors).

    Args:
        task: the task; its image must exist locally.
        model_patch: the agent's diff against the task's base commit ("" for none).
        config: a `SandboxConfig` for the container (memory, cpus, ...); None for the defaults.
        run_id: label of the container.
        timeout_s: limit of the test run.
        skip_empty: score an empty patch as unresolved without running anything (valid for tasks whose
            FAIL_TO_PASS tests were checked to fail on the base commit, as the bundled ones are).

    Raises:
        TaskError: nothing can grade the task (no FAIL_TO_PASS tests; for `swebench`, no eval script).
        SandboxError: no container could be started or the repository could not be prepared.
    """
    if grader_of(task) == "swebench":
        from agentrl.swe.official_run import grade_official

        return await grade_official(task, model_patch, config=config, run_id=run_id, timeout_s=timeout_s,
                                    skip_empty=skip_empty)  # fmt: skip
    _check_gradable(task)
    started = time.perf_counter()
    f2p = dict.fromkeys(task.FAIL_TO_PASS, MISSING)
    p2p = dict.fromkeys(task.PASS_TO_PASS, MISSING)
    if skip_empty and not model_patch.strip():
        return GradeResult(task.instance_id, False, True, f2p, p2p, error="empty patch: nothing was changed")
    sandbox, base = await open_task_sandbox(task, config, run_id=run_id)
    try:
        result = await _grade_in(sandbox, task, base, model_patch, timeout_s)
    finally:
        await asyncio.shield(sandbox.close())
    result.duration_s = time.perf_counter() - started
    return result


def _check_gradable(task: SWETask) -> None:
    if task.row_format == "r2e-gym":
        raise TaskError(
            f"{task.instance_id}: R2E-Gym rows are graded by their image's run_tests.sh against "
            "expected_output_json, which agentrl does not run; train on them with another reward"
        )
    if not task.FAIL_TO_PASS:
        raise TaskError(
            f"{task.instance_id}: no FAIL_TO_PASS tests, so nothing can tell the task resolved; "
            "give the row the tests the fix makes pass"
        )


async def _grade_in(sandbox: Any, task: SWETask, base: str, model_patch: str, timeout_s: float) -> GradeResult:
    f2p = dict.fromkeys(task.FAIL_TO_PASS, MISSING)
    p2p = dict.fromkeys(task.PASS_TO_PASS, MISSING)
    log: list[str] = []
    if model_patch.strip():
        applied = await apply_patch(sandbox, task, model_patch, "model")
        log.append(applied.stdout)
        if not applied.ok:
            return GradeResult(task.instance_id, False, False, f2p, p2p, error="the model patch does not apply",
                               log="\n".join(log))  # fmt: skip
    if task.test_patch.strip():
        files = patch_files(task.test_patch)
        await restore_files(sandbox, task, base, files, new_files(task.test_patch))
        applied = await apply_patch(sandbox, task, task.test_patch, "test")
        log.append(applied.stdout)
        if not applied.ok:
            raise SandboxError(f"the test patch of {task.instance_id} does not apply: {applied.stdout[-500:]}")
    run = await sandbox.exec(pytest_command(task, files_to_run(task)), timeout=timeout_s, workdir=work_repo(task))
    log.append(run.stdout + run.stderr)
    try:
        outcomes = parse_junit((await sandbox.read_file(REPORT)).decode("utf-8", errors="replace"))
    except (FileNotFoundError, ValueError) as exc:
        error = "the test run timed out" if run.timed_out else f"no test report ({exc})"
        return GradeResult(task.instance_id, False, True, f2p, p2p, run.timed_out, error, "\n".join(log))
    f2p = {t: str(outcomes.get(t, MISSING)) for t in f2p}
    p2p = {t: str(outcomes.get(t, MISSING)) for t in p2p}
    resolved = not run.timed_out and all(o == Outcome.PASSED for o in [*f2p.values(), *p2p.values()])
    error = "the test run timed out" if run.timed_out else None
    return GradeResult(task.instance_id, resolved, True, f2p, p2p, run.timed_out, error, "\n".join(log))


def log_outcome(task: SWETask, result: GradeResult) -> None:
    """One line per graded patch on stderr: the per-task outcomes of a training or eval run."""
    d = result.details()
    if result.error and "empty patch" in result.error:
        line = "no patch (nothing to test)"
    else:
        status = "RESOLVED" if result.resolved else "not resolved"
        error = f", {result.error}" if result.error else ""
        line = f"{status} (FAIL_TO_PASS {d['f2p_passed']}, PASS_TO_PASS {d['p2p_passed']}{error})"
    print(f"[agentrl swe] {task.instance_id}: {line} in {result.duration_s:.1f}s", file=sys.stderr, flush=True)


class GradeCache:
    """Grading results by (task, patch), shared by reward components; concurrent identical requests wait for one
    grading instead of starting their own. Bounded (least recently used entries go first). Each new grading is
    reported through `log` (default: one line on stderr; None: quiet)."""

    def __init__(self, max_entries: int = 4096, log: Callable[[SWETask, GradeResult], None] | None = log_outcome):
        self.max_entries = max_entries
        self.log = log
        self._done: OrderedDict[tuple[str, str], GradeResult] = OrderedDict()
        self._running: dict[tuple[str, str, int], asyncio.Task[GradeResult]] = {}

    async def grade(self, task: SWETask, model_patch: str, **kwargs: Any) -> GradeResult:
        """`grade_patch(task, model_patch, **kwargs)`, or its cached result."""
        key = (task.instance_id + "\0" + task.base_commit, hashlib.sha256(model_patch.encode()).hexdigest())
        if key in self._done:
            self._done.move_to_end(key)
            return self._done[key]
        loop_key = (*key, id(asyncio.get_running_loop()))
        running = self._running.get(loop_key)
        started_here = running is None
        if running is None:
            running = asyncio.ensure_future(grade_patch(task, model_patch, **kwargs))
            self._running[loop_key] = running
            running.add_done_callback(lambda _: self._running.pop(loop_key, None))
        result = await asyncio.shield(running)
        if started_here and self.log is not None:
            self.log(task, result)
        self._done[key] = result
        while len(self._done) > self.max_entries:
            self._done.popitem(last=False)
        return result

    def clear(self) -> None:
        self._done.clear()


GRADES = GradeCache()
"""The process-wide cache the `swe_tests` reward uses."""
