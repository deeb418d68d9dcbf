"""The official SWE-bench grading path on real Docker: a bundled task made into a SWE-bench-style instance (its
repository root-owned at /testbed, as in SWE-bench's images, and a row with the package's eval-script shape), graded
through `grade_patch` with the `swebench` grader: the gold patch resolves it, a useless one does not, a stale one
does not apply, and no container is left behind."""

from __future__ import annotations

import asyncio
import contextlib
import io

import pytest

from agentrl.swe.grading import files_to_run, grade_patch, grader_of
from agentrl.swe.report import patch_files
from agentrl.swe.task import SWETask

pytestmark = pytest.mark.integration

TAG = "agentrl-test/swebench-like:1"
DOCKERFILE = "FROM {image}\nRUN chown -R 0:0 /testbed\n"


@pytest.fixture
def swebench_image(docker_client, task):
    docker_client.images.build(fileobj=io.BytesIO(DOCKERFILE.format(image=task.image).encode()), tag=TAG, rm=True)
    yield TAG
    import docker

    with contextlib.suppress(docker.errors.NotFound):
        docker_client.images.remove(TAG, force=True)


def eval_script(task: SWETask) -> str:
    """An eval script in the shape the swebench package publishes for Python repositories."""
    tests = " ".join(patch_files(task.test_patch))
    paths = ":".join(f"/testbed/{p}".rstrip("/.") for p in (task.image_build or {}).get("python_path", ["."]))
    run = f"PYTHONPATH={paths}:/opt/swe/deps python3 -m pytest -rA -p no:cacheprovider -o addopts=''"
    return "\n".join(
        [
            "#!/bin/bash",
            "set -uxo pipefail",
            "cd /testbed",
            "git config --global --add safe.directory /testbed",
            "git status",
            f"git checkout {task.base_commit} {tests}",
            "git apply -v - <<'EOF_114329324912'",
            task.test_patch.rstrip("\n"),
            "EOF_114329324912",
            ": '>>>>> Start Test Output'",
            f"{run} {' '.join(files_to_run(task))}",
            ": '>>>>> End Test Output'",
            f"git checkout {task.base_commit} {tests}",
        ]
    )


async def test_official_grading_in_a_container(task, swebench_image, no_leftovers):
    row = {
        **task.model_dump(exclude={"image_name", "image_build", "row_format"}),
        "image_build": task.image_build,
        "image": swebench_image,
        "eval_script": eval_script(task),
        "log_parser": "parse_log_pytest_v2",
        "eval_type": "pass_and_fail",
        "grader": "swebench",
    }
    official = SWETask.from_row(row)
    assert grader_of(official) == "swebench" and official.image == swebench_image
    path = patch_files(task.patch)[0]
    useless = f"--- a/{path}\n+++ b/{path}\n@@ -0,0 +1 @@\n+# looked at this file\n"
    stale = f"--- a/{path}\n+++ b/{path}\n@@ -1,2 +1,2 @@\n-no such line here\n+a fix\n nor this one\n"
    gold, wrong, broken = await asyncio.gather(
        *(grade_patch(official, p, timeout_s=300) for p in (task.patch, useless, stale))
    )
    assert gold.resolved and gold.f2p_fraction == 1.0 and gold.p2p_fraction == 1.0, gold.details()
    assert ">>>>> Start Test Output" in gold.log and ">>>>> Test Exit Code: 0" in gold.log
    assert not wrong.resolved and wrong.patch_applied and wrong.f2p_fraction == 0.0, wrong.details()
    assert wrong.p2p_fraction == 1.0, wrong.details()
    assert not broken.resolved and not broken.patch_applied and "does not apply" in broken.error


async def test_swe_smith_row_starts_from_its_bug(task, docker_client, no_leftovers):
    """A SWE-smith row: its `patch` (the bug) is applied and committed on the image's checkout; grading works on
    top of it (here the "bug" is a new file, and the bundled task's tests stand in for the repository's)."""
    from agentrl.swe.repo import open_task_sandbox

    bug = "diff --git a/SMITH_BUG.txt b/SMITH_BUG.txt\nnew file mode 100644\n--- /dev/null\n+++ b/SMITH_BUG.txt\n"
    bug += "@@ -0,0 +1 @@\n+the bug\n"
    row = {
        "instance_id": f"{task.instance_id}.smith", "repo": f"swesmith/{task.instance_id}", "patch": bug,
        "FAIL_TO_PASS": task.FAIL_TO_PASS, "PASS_TO_PASS": task.PASS_TO_PASS, "image_name": task.image,
        "problem_statement": task.problem_statement, "test_patch": task.test_patch, "env_setup": "",
        "base_commit": "0" * 40,
    }  # fmt: skip
    smith = SWETask.from_row(row, row_format="swe-smith")
    sandbox, base = await open_task_sandbox(smith, run_id="test-smith")
    try:
        shown = await sandbox.exec("cat SMITH_BUG.txt && git log -1 --format=%s && git status --porcelain", timeout=30)
    finally:
        await sandbox.close()
    assert shown.stdout.split("\n")[:3] == ["the bug", "task start", ""] and len(base) == 40
    gold, empty = await asyncio.gather(grade_patch(smith, task.patch), grade_patch(smith, ""))
    assert gold.resolved, gold.details()
    assert not empty.resolved and empty.f2p_fraction == 0.0
