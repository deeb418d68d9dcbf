"""SWE-bench rows graded like SWE-bench: recorded test logs of each repository family (in its runner's real output
format) parsed through the official package into per-test statuses and a resolved decision, checked against the
package's own `get_eval_report`; the official test command of a Django row; grader selection and dispatch."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest
from swebench.harness.constants import FAIL_TO_PASS, PASS_TO_PASS
from swebench.harness.grading import get_eval_report
from swebench.harness.log_parsers import PARSER_REGISTRY
from swebench.harness.log_parsers.python import parse_log_sphinx

from agentrl.swe import grading, official, official_run
from agentrl.swe.grading import grade_patch, grader_of
from agentrl.swe.official import command_of, eval_script, grade_log, log_parser_name
from agentrl.swe.task import SWETask, TaskError

START, END = "+ : '>>>>> Start Test Output'", "+ : '>>>>> End Test Output'"


def exit_code(code: int) -> str:
    """The lines the package's eval scripts print after the tests (`record_test_exit_code`)."""
    return (
        f"+ SWEBENCH_TEST_EXIT_CODE={code}\n{END}\n+ echo '>>>>> Test Exit Code: {code}'\n>>>>> Test Exit Code: {code}"
    )


def swebench_task(repo: str, instance_id: str, f2p: list[str], p2p: list[str], **columns) -> SWETask:
    row = {
        "repo": repo, "instance_id": instance_id, "base_commit": "0" * 40, "patch": "", "test_patch": "",
        "problem_statement": "bug", "hints_text": "", "created_at": "2020-01-01T00:00:00Z", "version": "1.0",
        "FAIL_TO_PASS": f2p, "PASS_TO_PASS": p2p, "environment_setup_commit": "0" * 40, **columns,
    }  # fmt: skip
    return SWETask.from_row(row)


def package_report(task: SWETask, log: str, tmp_path: Path) -> dict:
    """What the package's own harness reports for this log (`get_eval_report`, as `run_instance` calls it)."""
    path = tmp_path / "test_output.txt"
    path.write_text(log)
    pred = {"instance_id": task.instance_id, "model_patch": "diff", "model_name_or_path": "m"}
    return get_eval_report(official.spec_of(task), pred, str(path), include_tests_status=True)[task.instance_id]


def assert_agrees_with_package(task: SWETask, log: str, tmp_path: Path):
    result = grade_log(task, log)
    report = package_report(task, log, tmp_path)
    assert result.resolved == report["resolved"]
    if "tests_status" not in report:  # a log the package refuses: nothing passes
        assert not any(o == "passed" for o in {**result.fail_to_pass, **result.pass_to_pass}.values())
        return result
    for ours, key in ((result.fail_to_pass, FAIL_TO_PASS), (result.pass_to_pass, PASS_TO_PASS)):
        assert {t for t, o in ours.items() if o == "passed"} == set(report["tests_status"][key]["success"])
        assert {t for t, o in ours.items() if o != "passed"} == set(report["tests_status"][key]["failure"])
    return result


# ---- Django: its own runner, `test_x (module.Class) ... ok` ------------------------------------------------------

DJANGO_TESTS = "template_tests.filter_tests.test_floatformat"
DJANGO_COMMAND = f"./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 {DJANGO_TESTS}"
DJANGO_SCRIPT = f"""#!/bin/bash
set -uxo pipefail
source /opt/miniconda3/bin/activate
conda activate testbed
cd /testbed
git config --global --add safe.directory /testbed
cd /testbed
git status
git show
git -c core.fileMode=false diff 37c5b8c07be104fd5288cd87f101e48cb7a40298
source /opt/miniconda3/bin/activate
conda activate testbed
python -m pip install -e .
git checkout 37c5b8c07be104fd5288cd87f101e48cb7a40298 tests/template_tests/filter_tests/test_floatformat.py
git apply -v - <<'EOF_114329324912'
--- a/tests/template_tests/filter_tests/test_floatformat.py
+++ b/tests/template_tests/filter_tests/test_floatformat.py
EOF_114329324912
: '>>>>> Start Test Output'
{DJANGO_COMMAND}
: '>>>>> End Test Output'
git checkout 37c5b8c07be104fd5288cd87f101e48cb7a40298 tests/template_tests/filter_tests/test_floatformat.py
"""
F2P_DJANGO = f"test_inputs ({DJANGO_TESTS}.FunctionTests)"
P2P_DJANGO = [
    f"test_floatformat01 ({DJANGO_TESTS}.FloatformatTests)",
    f"test_zero_values ({DJANGO_TESTS}.FunctionTests)",
]


def django_task(**columns) -> SWETask:
    return swebench_task("django/django", "django__django-16485", [F2P_DJANGO], P2P_DJANGO, **columns)


def django_log(inputs: str, code: int) -> str:
    failure = "" if inputs == "ok" else (
        f"\n======================================================================\nFAIL: {F2P_DJANGO}\n"
        "----------------------------------------------------------------------\nTraceback (most recent call last):\n"
        "AssertionError: '123456.123456789012345677' != '123456.123456789012345678901'\n"
    )  # fmt: skip
    return f"""+ git apply -v -
Checking patch tests/template_tests/filter_tests/test_floatformat.py...
Applied patch tests/template_tests/filter_tests/test_floatformat.py cleanly.
{START}
+ ./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 {DJANGO_TESTS}
Testing against Django installed in '/testbed/django'
Importing application template_tests
Skipping setup of unused database(s): default, other.
System check identified no issues (0 silenced).
{P2P_DJANGO[0]} ... ok
{F2P_DJANGO} ... {inputs}
{P2P_DJANGO[1]} ... ok
{failure}
----------------------------------------------------------------------
Ran 3 tests in 0.004s

{"OK" if code == 0 else "FAILED (failures=1)"}
{exit_code(code)}
+ git checkout 37c5b8c07be104fd5288cd87f101e48cb7a40298 tests/template_tests/filter_tests/test_floatformat.py
"""


def test_a_django_row_builds_the_official_test_command():
    task = django_task(eval_script=DJANGO_SCRIPT, log_parser="parse_log_django", eval_type="pass_and_fail")
    assert command_of(task) == DJANGO_COMMAND
    script = eval_script(task)  # the package's TestSpec: its header, and the test command's exit code recorded
    assert script.startswith("#!/bin/bash\nset -uxo pipefail\n") and "SWEBENCH_TEST_EXIT_CODE=$?" in script
    assert log_parser_name(task) == "parse_log_django"


@pytest.mark.parametrize(("inputs", "code", "resolved"), [("ok", 0, True), ("FAIL", 1, False)])
def test_django_log(tmp_path, inputs, code, resolved):
    result = assert_agrees_with_package(django_task(), django_log(inputs, code), tmp_path)
    assert result.resolved is resolved and result.patch_applied and result.error is None
    assert result.fail_to_pass == {F2P_DJANGO: "passed" if resolved else "failed"}
    assert result.pass_to_pass == dict.fromkeys(P2P_DJANGO, "passed")


# ---- sympy: bin/test --------------------------------------------------------------------------------------------


def sympy_log(as_set: str) -> str:
    failure = "" if as_set == "ok" else (
        "\n________________________________________________________________________________\n"
        "_______________ sympy/sets/tests/test_contains.py:test_as_set ________________\n"
        "Traceback (most recent call last):\n  File \"/testbed/sympy/sets/tests/test_contains.py\", line 45, in "
        "test_as_set\n    assert Contains(x, FiniteSet(y)).as_set() == FiniteSet(y)\nAssertionError\n"
    )  # fmt: skip
    summary = "5 passed" if as_set == "ok" else "4 passed, 1 failed"
    return f"""{START}
+ PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C --verbose sympy/sets/tests/test_contains.py
============================= test process starts ==============================
executable:         /opt/miniconda3/envs/testbed/bin/python  (3.9.19-final-0) [CPython]
architecture:       64-bit
cache:              no
ground types:       python
numpy:              None
random seed:        21773536
hash randomization: on (PYTHONHASHSEED=1473329063)

sympy/sets/tests/test_contains.py[5]
test_contains_basic ok
test_issue_6194 ok
test_issue_10326 ok
test_as_set {as_set}
test_type_error ok                                                          {"[OK]" if as_set == "ok" else "[FAIL]"}

{failure}
================== tests finished: {summary}, in 0.03 seconds ===================
{exit_code(0 if as_set == "ok" else 1)}
"""


@pytest.mark.parametrize(("as_set", "resolved"), [("ok", True), ("F", False)])
def test_sympy_log(tmp_path, as_set, resolved):
    task = swebench_task(
        "sympy/sympy", "sympy__sympy-23950", ["test_as_set"], ["test_contains_basic", "test_issue_6194"]
    )
    assert log_parser_name(task) == "parse_log_sympy"  # from the package's table for the repository
    result = assert_agrees_with_package(task, sympy_log(as_set), tmp_path)
    assert result.resolved is resolved
    assert result.fail_to_pass == {"test_as_set": "passed" if resolved else "failed"}
    assert result.pass_to_pass == {"test_contains_basic": "passed", "test_issue_6194": "passed"}


# ---- a pytest-based repository: pytest -rA ----------------------------------------------------------------------

PYTEST_NAMES = ("test_multiline_message", "test_coloredlogformatter", "test_colored_short_level")
PYTEST_IDS = [f"testing/logging/test_formatter.py::{name}" for name in PYTEST_NAMES]


def pytest_log(multiline: str, summary: str) -> str:
    lines = [f"{status} {tid}" for status, tid in zip(("PASSED", "PASSED", multiline), PYTEST_IDS[::-1], strict=True)]
    if multiline == "FAILED":
        lines[-1] += " - AssertionError: assert 'dummypath    10 INFO     Test Message line1' == ..."
    body = "\n".join(lines)
    return f"""{START}
+ pytest -rA testing/logging/test_formatter.py
============================= test session starts ==============================
platform linux -- Python 3.9.19, pytest-5.4.1.dev154+gbe68496, py-1.11.0, pluggy-0.13.1
rootdir: /testbed, inifile: tox.ini
collected 3 items

testing/logging/test_formatter.py ..{"." if multiline == "PASSED" else "F"}                                    [100%]

==================================== PASSES ====================================
=========================== short test summary info ============================
{body}
========================= {summary} in 0.05s ==========================
{exit_code(0 if multiline == "PASSED" else 1)}
"""


@pytest.mark.parametrize(("multiline", "summary", "resolved"), [("PASSED", "3 passed", True),
                                                                ("FAILED", "1 failed, 2 passed", False)])  # fmt: skip
def test_pytest_repository_log(tmp_path, multiline, summary, resolved):
    task = swebench_task("pytest-dev/pytest", "pytest-dev__pytest-7122", PYTEST_IDS[:1], PYTEST_IDS[1:])
    assert log_parser_name(task) == "parse_log_pytest"
    result = assert_agrees_with_package(task, pytest_log(multiline, summary), tmp_path)
    assert result.resolved is resolved
    assert result.fail_to_pass == {PYTEST_IDS[0]: multiline.lower()}
    assert result.pass_to_pass == dict.fromkeys(PYTEST_IDS[1:], "passed")


# ---- sphinx: tox, then pytest -rA with coloured statuses ----------------------------------------------------------

SPHINX_F2P = "tests/test_ext_autodoc_configs.py::test_autodoc_typehints_description_no_undoc"
SPHINX_P2P = ["tests/test_ext_autodoc_configs.py::test_autoclass_content_class",
              "tests/test_ext_autodoc_configs.py::test_autodoc_typehints_signature"]  # fmt: skip


def sphinx_log(f2p_status: str) -> str:
    green = "\x1b[32mPASSED\x1b[0m"
    failed = " - AssertionError: assert 'Return type:' in ..." if f2p_status == "FAILED" else ""
    code = 0 if f2p_status == "PASSED" else 1
    return f"""{START}
+ tox --current-env -epy39 -v -- tests/test_ext_autodoc_configs.py
py39: commands[0]> python -X dev -m pytest -rA --durations 25 tests/test_ext_autodoc_configs.py
============================= test session starts ==============================
platform linux -- Python 3.9.19, pytest-8.3.3, pluggy-1.5.0
cachedir: .tox/py39/.pytest_cache
libraries: Sphinx-7.2.0+/ab3f4d7, docutils-0.20.1
base tempdir: /tmp/pytest-of-root/pytest-0
rootdir: /testbed
configfile: pyproject.toml
collected 3 items

tests/test_ext_autodoc_configs.py ..{"." if code == 0 else "F"}                                     [100%]

==================================== PASSES ====================================
=========================== short test summary info ============================
{green} {SPHINX_P2P[0]}
{green} {SPHINX_P2P[1]}
{f2p_status} {SPHINX_F2P}{failed}
  py39: {"OK" if code == 0 else f"exit {code}"} (1.23 seconds) /testbed> python -X dev -m pytest -rA tests/test_ext_autodoc_configs.py pid=2110
{exit_code(code)}
"""  # noqa: E501


@pytest.mark.parametrize(("f2p_status", "resolved"), [("PASSED", True), ("FAILED", False)])
def test_sphinx_log(tmp_path, f2p_status, resolved):
    task = swebench_task("sphinx-doc/sphinx", "sphinx-doc__sphinx-8459", [SPHINX_F2P], SPHINX_P2P)
    assert PARSER_REGISTRY[log_parser_name(task)] is parse_log_sphinx
    result = assert_agrees_with_package(task, sphinx_log(f2p_status), tmp_path)
    assert result.resolved is resolved
    assert result.fail_to_pass == {SPHINX_F2P: f2p_status.lower()}
    assert result.pass_to_pass == dict.fromkeys(SPHINX_P2P, "passed")  # the coloured statuses were read


# ---- the package's checks on a log ---------------------------------------------------------------------------------


def test_logs_the_package_rejects_are_unresolved(tmp_path):
    task = django_task()
    no_markers = django_log("ok", 0).replace(START, "").replace(END, "")
    spoofed = django_log("ok", 1)  # every test "ok", yet the test command failed: not the run that happened
    patch_failed = ">>>>> Patch Apply Failed:\nerror: patch failed: django/utils/numberformat.py:10\n"
    for log in (no_markers, spoofed, patch_failed):
        result = assert_agrees_with_package(task, log, tmp_path)
        assert not result.resolved and result.error and set(result.fail_to_pass.values()) == {"missing"}
    assert grade_log(task, no_markers).patch_applied and not grade_log(task, patch_failed).patch_applied


def test_a_skipped_pass_to_pass_test_is_maintained_as_the_package_says(tmp_path):
    log = django_log("ok", 0).replace(f"{P2P_DJANGO[1]} ... ok", f"{P2P_DJANGO[1]} ... skipped 'no numpy'")
    result = assert_agrees_with_package(django_task(), log, tmp_path)
    assert result.resolved and result.p2p_fraction == 1.0


def test_a_row_without_an_eval_script_cannot_run_but_its_logs_grade(tmp_path):
    task = django_task()
    with pytest.raises(TaskError, match="no eval_script column.*grader=pytest"):
        command_of(task)
    assert grade_log(task, django_log("ok", 0)).resolved


def test_unknown_parser_says_what_to_do():
    with pytest.raises(TaskError, match="no log parser for repository 'me/mine'.*grader=pytest"):
        log_parser_name(swebench_task("me/mine", "me__mine-1", ["t"], []))
    with pytest.raises(TaskError, match="parse_log_nope"):
        log_parser_name(django_task(log_parser="parse_log_nope"))


# ---- applying the model patch as the harness does ------------------------------------------------------------------


def git_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.py").write_text("x = 1\ny = 2\n")
    for cmd in ("git init -q", "git add -A", "git -c user.name=t -c user.email=t@t commit -qm base"):
        subprocess.run(cmd, shell=True, cwd=repo, check=True)
    return repo


@pytest.mark.parametrize(
    ("patch", "applied", "content"),
    [
        ("--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n-x = 1\n+x = 10\n y = 2\n", True, "x = 10\ny = 2\n"),
        ("--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n-x = 7\n+x = 10\n z = 2\n", False, "x = 1\ny = 2\n"),
        ("", True, "x = 1\ny = 2\n"),  # `patch` takes an empty one: the harness then runs the unchanged tests
    ],
)
def test_model_patch_applies_through_the_harness_commands(tmp_path, patch, applied, content):
    repo = git_repo(tmp_path)
    (tmp_path / "model.patch").write_text(patch)
    run = subprocess.run(["bash", "-c", official_run.apply_script(str(tmp_path / "model.patch"))], cwd=repo,
                         capture_output=True, text=True)  # fmt: skip
    assert (run.returncode == 0) is applied
    assert (">>>>> Applied Patch" if applied else ">>>>> Patch Apply Failed") in run.stdout
    assert (repo / "a.py").read_text() == content


# ---- which grader -----------------------------------------------------------------------------------------------


def test_grader_is_chosen_per_row_never_guessed():
    assert grader_of(django_task()) == "swebench"  # a SWE-bench row of a repository the package knows
    assert grader_of(django_task(grader="pytest")) == "pytest"  # the row says so
    assert grader_of(swebench_task("me/mine", "me__mine-1", ["t"], [])) == "pytest"  # the package does not know it
    plain = SWETask(instance_id="django__django-1", repo="django/django", problem_statement="bug")
    assert grader_of(plain) == "pytest"  # not a SWE-bench row: a repository name alone decides nothing
    assert grader_of(plain.model_copy(update={"grader": "swebench"})) == "swebench"
    gym = SWETask.from_row(django_task().model_dump(exclude={"row_format"}), row_format="swe-gym")
    assert grader_of(gym) == "pytest"
    with pytest.raises(TaskError, match="unknown grader 'junit'; use one of swebench, pytest"):
        SWETask.from_row({**django_task().model_dump(), "grader": "junit"})


def test_grade_patch_and_the_reward_dispatch_on_the_grader(monkeypatch):
    calls = []

    async def fake_official(task, patch, **kwargs):
        calls.append((task.instance_id, patch, kwargs["timeout_s"]))
        return grading.GradeResult(task.instance_id, True, True)

    monkeypatch.setattr(official_run, "grade_official", fake_official)
    result = asyncio.run(grade_patch(django_task(), "diff", timeout_s=99))
    assert result.resolved and calls == [("django__django-16485", "diff", 99)]
    with pytest.raises(TaskError, match="no FAIL_TO_PASS tests"):
        asyncio.run(grade_patch(django_task(grader="pytest", FAIL_TO_PASS=[]), "diff"))
    assert len(calls) == 1
