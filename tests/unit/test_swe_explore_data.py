"""The swe_explore tier's tasks ask what the tier promises: the failing test's name as the only clue (never the
traceback, the file or the line), the failing tests runnable in the agent's repository, and held-out bugs in
functions no training task touches."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrl.swe.task import load_tasks

DATA = Path(__file__).resolve().parents[2] / "recipes" / "swe_explore" / "data"
SPLITS = {split: load_tasks(DATA / f"{split}.jsonl") for split in ("train", "eval")}


@pytest.mark.parametrize("split", SPLITS)
def test_the_issue_names_the_failing_test_and_nothing_of_the_bug(split) -> None:
    for task in SPLITS[split]:
        bug = task.image_build["bug"]
        assert f"`{task.FAIL_TO_PASS[0]}`" in task.problem_statement
        statement = task.problem_statement.replace(task.FAIL_TO_PASS[0], "")  # the test's own name may hold a path
        for clue in (bug["file"], f":{bug['line']}", "Error", "Traceback", bug["kind"].split()[-1]):
            assert clue not in statement, (task.instance_id, clue)
        assert task.start_patch == task.test_patch and task.test_patch.strip()  # the tests are in the repository


def test_held_out_bugs_are_in_functions_no_training_task_touches() -> None:
    def functions(tasks):
        return {(t.repo, t.image_build["bug"]["file"], t.image_build["bug"]["function"]) for t in tasks}

    assert len(SPLITS["eval"]) >= 16 and not functions(SPLITS["eval"]) & functions(SPLITS["train"])
