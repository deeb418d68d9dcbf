"""SWE-bench's own grading, from the official `swebench` package: a task's test spec (its eval script and test
command, the log parser of its repository, its eval type) and the grading of a test log exactly as the package's
harness grades it.

```python
command_of(task)         # ./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 ... (Django)
grade_log(task, log_text)  # GradeResult: resolved, each FAIL_TO_PASS / PASS_TO_PASS test's outcome
```

swebench 5 takes an instance's eval script, log parser and eval type from its dataset row (the `eval_script`,
`log_parser`, `eval_type` and `image` columns of SWE-bench as the package publishes it) and builds the spec with
`make_test_spec`. A row without `log_parser` (an older download) gets the package's parser for its repository (its
`MAP_REPO_TO_PARSER_*` tables), so its recorded logs grade too; running its tests needs the `eval_script`
(`agentrl.swe.official_run`).
"""

from __future__ import annotations

import importlib
import pkgutil
import tempfile
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentrl.swe.grade_result import MISSING, GradeResult
from agentrl.swe.report import Outcome
from agentrl.swe.task import SWETask, TaskError

if TYPE_CHECKING:
    from swebench.types import TestSpec

_OUTCOMES = {"PASSED": Outcome.PASSED, "XFAIL": Outcome.PASSED, "FAILED": Outcome.FAILED,
             "ERROR": Outcome.ERROR, "SKIPPED": Outcome.SKIPPED}  # fmt: skip
"""swebench's `TestStatus` values as agentrl's outcomes (an expected failure passes, as in its grading)."""


@cache
def repo_parsers() -> dict[str, Callable[..., dict[str, str]]]:
    """The package's log parser of every repository it knows, over all its languages."""
    import swebench.harness.log_parsers as log_parsers

    parsers: dict[str, Callable[..., dict[str, str]]] = {}
    for info in pkgutil.iter_modules(log_parsers.__path__):
        module = importlib.import_module(f"{log_parsers.__name__}.{info.name}")
        for name, table in vars(module).items():
            if name.startswith("MAP_REPO_TO_PARSER") and isinstance(table, dict):
                parsers.update(table)
    return parsers


def knows(task: SWETask) -> bool:
    """The package can grade the task's logs: the row names its log parser, or the package has one for its repo."""
    return bool(_extra(task).get("log_parser")) or task.repo in repo_parsers()


def log_parser_name(task: SWETask) -> str:
    """The name, in the package's `PARSER_REGISTRY`, of the parser of the task's test logs.

    Raises:
        TaskError: the row names no parser the package has, and the package has none for the repository.
    """
    from swebench.harness.log_parsers import PARSER_REGISTRY

    named = _extra(task).get("log_parser")
    if named:
        if named not in PARSER_REGISTRY:
            raise TaskError(f"{task.instance_id}: log_parser {named!r} is not one of swebench's (PARSER_REGISTRY)")
        return str(named)
    parser = repo_parsers().get(task.repo)
    if parser is None:
        raise TaskError(
            f"{task.instance_id}: swebench has no log parser for repository {task.repo!r}; give the row a "
            "log_parser column, or grade it with agentrl's pytest run (extra_info.grader=pytest)"
        )
    # Parsers are aliased (parse_log_sphinx is parse_log_pytest_v2): any name of the same function parses alike.
    return next(name for name, fn in PARSER_REGISTRY.items() if fn is parser)


def eval_type(task: SWETask) -> str:
    """`pass_and_fail`, or `fail_only` for the repositories whose logs list failures only (the row's column first)."""
    from swebench.harness.constants import FAIL_ONLY_REPOS, EvalType

    named = _extra(task).get("eval_type")
    if named:
        return EvalType(named).value
    return (EvalType.FAIL_ONLY if task.repo in FAIL_ONLY_REPOS else EvalType.PASS_AND_FAIL).value


def spec_of(task: SWETask) -> TestSpec:
    """The package's `TestSpec` of the task (`make_test_spec` over the row; the eval script empty when absent).

    Raises:
        TaskError: no log parser is known for the task (see `log_parser_name`).
    """
    from swebench.harness.utils import make_test_spec

    extra = _extra(task)
    instance = {
        "instance_id": task.instance_id,
        "repo": task.repo,
        "version": task.version or "",
        "FAIL_TO_PASS": task.FAIL_TO_PASS,
        "PASS_TO_PASS": task.PASS_TO_PASS,
        "image": task.image,
        "eval_script": extra.get("eval_script") or "",
        "log_parser": log_parser_name(task),
        "eval_type": eval_type(task),
        "image_assets": extra.get("image_assets"),
    }
    return make_test_spec(instance)


def eval_script(task: SWETask) -> str:
    """The official eval script of the task: resets the test files, applies the test patch, runs the tests between
    the package's start and end markers and records their exit code.

    Raises:
        TaskError: the row has no `eval_script` column (swebench 5 takes it from the dataset row).
    """
    if not _extra(task).get("eval_script"):
        raise TaskError(
            f"{task.instance_id}: the row has no eval_script column, and swebench>=5 takes each instance's test "
            "command from its dataset row: load the dataset as the swebench package publishes it (with its "
            "eval_script, log_parser, eval_type and image columns), or grade the row with agentrl's pytest run "
            "(extra_info.grader=pytest)"
        )
    return spec_of(task).eval_script


def command_of(task: SWETask) -> str:
    """The test command of the task's eval script: its lines between the start and end markers.

    Raises:
        TaskError: the row has no `eval_script`, or one without the package's markers.
    """
    from swebench.harness.constants import END_TEST_OUTPUT, START_TEST_OUTPUT, TEST_EXIT_CODE_VAR

    lines = eval_script(task).splitlines()
    start = next((i for i, line in enumerate(lines) if START_TEST_OUTPUT in line), None)
    end = next((i for i, line in enumerate(lines) if END_TEST_OUTPUT in line), None)
    if start is None or end is None or end < start:
        raise TaskError(f"{task.instance_id}: its eval_script lacks the '{START_TEST_OUTPUT}' / end markers")
    return "\n".join(line for line in lines[start + 1 : end] if not line.startswith(f"{TEST_EXIT_CODE_VAR}="))


def grade_log(task: SWETask, log: str) -> GradeResult:
    """Grade the output of the task's eval script as the package does: its `get_logs_eval` (the repository's parser
    over the text between the markers, with its checks for a failed patch, an error, a timeout, a run that never
    started), then `get_eval_tests_report` and `get_resolution_status` (resolved when it is `RESOLVED_FULL`).

    Outcomes are the package's verdicts: a test it counts as passing is `passed` (so a skipped PASS_TO_PASS test
    is, as in its grading), a failing one keeps its logged status, or `missing`. The fractions therefore equal the
    package's `compute_fail_to_pass` / `compute_pass_to_pass`.

    Raises:
        TaskError: no log parser is known for the task.
    """
    from swebench.harness.constants import APPLY_PATCH_FAIL, FAIL_TO_PASS, PASS_TO_PASS, EvalType, ResolvedStatus
    from swebench.harness.grading import get_eval_tests_report, get_logs_eval, get_resolution_status

    spec = spec_of(task)
    with tempfile.TemporaryDirectory(prefix="agentrl-swebench-") as tmp:
        path = Path(tmp) / "test_output.txt"
        path.write_text(log, encoding="utf-8")
        status_map, found = get_logs_eval(spec, str(path))
    if not found:
        error = "the log has no test results the package accepts (patch failed, tests errored or timed out)"
        f2p, p2p = dict.fromkeys(spec.FAIL_TO_PASS, MISSING), dict.fromkeys(spec.PASS_TO_PASS, MISSING)
        return GradeResult(task.instance_id, False, APPLY_PATCH_FAIL not in log, f2p, p2p, error=error, log=log)
    gold = {"instance_id": spec.instance_id, FAIL_TO_PASS: spec.FAIL_TO_PASS, PASS_TO_PASS: spec.PASS_TO_PASS}
    report = get_eval_tests_report(status_map, gold, eval_type=EvalType(spec.eval_type))
    resolved = get_resolution_status(report) == ResolvedStatus.FULL.value
    f2p = _outcomes(spec.FAIL_TO_PASS, report[FAIL_TO_PASS], status_map)
    p2p = _outcomes(spec.PASS_TO_PASS, report[PASS_TO_PASS], status_map)
    return GradeResult(task.instance_id, resolved, True, f2p, p2p, log=log)


def _outcomes(tests: list[str], verdict: dict[str, list[str]], status_map: dict[str, str]) -> dict[str, str]:
    passing = set(verdict["success"])
    return {t: str(Outcome.PASSED) if t in passing else str(_OUTCOMES.get(status_map.get(t, ""), MISSING))
            for t in tests}  # fmt: skip


def _extra(task: SWETask) -> dict[str, Any]:
    return task.model_extra or {}
