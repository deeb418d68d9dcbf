"""What the swe_explore recipe asks of the easy tier's tasks (`agent.kwargs.issue=failing_test`): the failing test's
name as the only clue, never the traceback, the file or the line; its held-out bugs in functions no training task
touches."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrl.config import load_config
from agentrl.loops.swe import failing_test_statement
from agentrl.swe.task import load_tasks

CFG = load_config(overrides=["recipe=swe_explore"])
SPLITS = {"train": load_tasks(CFG.data.train_files[0]), "eval": load_tasks(CFG.data.eval_files[0])}


def test_the_recipe_asks_the_failing_test_and_shows_the_tests() -> None:
    assert CFG.agent.kwargs["issue"] == "failing_test" and CFG.agent.kwargs["tests_visible"] is True
    assert Path(CFG.data.train_files[0]).resolve().parent.parent.name == "swe_easy"


@pytest.mark.parametrize("split", SPLITS)
def test_the_issue_names_the_failing_test_and_nothing_of_the_bug(split) -> None:
    for task in SPLITS[split]:
        bug = task.image_build["bug"]
        statement = failing_test_statement(task)
        assert f"`{task.FAIL_TO_PASS[0]}`" in statement
        statement = statement.replace(task.FAIL_TO_PASS[0], "")  # the test's own name may hold a path
        for clue in (bug["file"], f":{bug['line']}", "Error", "Traceback", bug["kind"].split()[-1]):
            assert clue not in statement, (task.instance_id, clue)
        assert task.test_patch.strip()  # there are tests to show


def test_held_out_bugs_are_in_functions_no_training_task_touches() -> None:
    def functions(tasks):
        return {(t.repo, t.image_build["bug"]["file"], t.image_build["bug"]["function"]) for t in tasks}

    assert len(SPLITS["eval"]) >= 16 and not functions(SPLITS["eval"]) & functions(SPLITS["train"])
