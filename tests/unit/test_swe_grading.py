"""Grading without Docker: the cache, the empty-patch shortcut, the reward's metrics."""

import asyncio

import pytest

from agentrl.config.schema import RewardConfig
from agentrl.rewards.pipeline import RewardPipeline
from agentrl.swe import grading
from agentrl.swe.grading import GradeCache, GradeResult, files_to_run, grade_patch, pytest_command
from agentrl.swe.task import SWETask
from agentrl.types import Trajectory

TASK = SWETask(
    instance_id="o__r-1",
    problem_statement="bug",
    FAIL_TO_PASS=["tests/test_a.py::test_x", "tests/test_a.py::test_y"],
    PASS_TO_PASS=["tests/test_b.py::test_z"],
    test_patch="diff --git a/tests/test_a.py b/tests/test_a.py\n--- /dev/null\n+++ b/tests/test_a.py\n",
    image_name="img:1",
)


def test_empty_patch_is_unresolved_without_a_container():
    result = asyncio.run(grade_patch(TASK, "  \n", skip_empty=True))
    assert not result.resolved and result.patch_applied and "empty patch" in result.error
    assert result.fail_to_pass == {t: "missing" for t in TASK.FAIL_TO_PASS}
    assert result.f2p_fraction == 0.0


def test_tests_run_are_the_test_patch_files_and_the_ids_files():
    assert files_to_run(TASK) == ["tests/test_a.py", "tests/test_b.py"]
    cmd = pytest_command(TASK, files_to_run(TASK))
    assert "--junitxml=" in cmd and "junit_family=xunit1" in cmd and cmd.endswith("tests/test_a.py tests/test_b.py")
    conda = TASK.model_copy(update={"image_name": None, "instance_id": "django__django-1"})
    assert pytest_command(conda, ["t.py"]).startswith("source /opt/miniconda3/bin/activate testbed\n")


def fake_result(resolved: bool, f2p: dict, p2p: dict) -> GradeResult:
    return GradeResult("o__r-1", resolved, True, f2p, p2p)


def test_cache_grades_identical_patches_once(monkeypatch):
    calls = []

    async def fake_grade(task, patch, **kwargs):
        calls.append(patch)
        await asyncio.sleep(0.05)
        return fake_result(patch == "good", {}, {})

    monkeypatch.setattr(grading, "grade_patch", fake_grade)
    cache = GradeCache(max_entries=2)

    async def main():
        return await asyncio.gather(*(cache.grade(TASK, p) for p in ["good", "good", "bad", "good"]))

    results = asyncio.run(main())
    assert [r.resolved for r in results] == [True, True, False, True]
    assert sorted(calls) == ["bad", "good"]
    asyncio.run(cache.grade(TASK, "other"))
    asyncio.run(cache.grade(TASK, "good"))  # evicted by the bound of 2 entries: graded again
    assert calls.count("good") == 2


@pytest.mark.parametrize(
    ("f2p", "p2p", "resolved", "f2p_score"),
    [
        ({"a": "passed", "b": "failed"}, {"c": "passed"}, False, 0.5),
        ({"a": "passed", "b": "passed"}, {"c": "failed"}, False, 0.0),  # a broken PASS_TO_PASS earns nothing
        ({"a": "passed", "b": "passed"}, {"c": "passed"}, True, 1.0),
    ],
)
def test_reward_components(monkeypatch, f2p, p2p, resolved, f2p_score):
    async def fake_grade(task, patch, **kwargs):
        assert patch == "the patch" and kwargs["timeout_s"] == 120
        return fake_result(resolved, f2p, p2p)

    monkeypatch.setattr(grading, "grade_patch", fake_grade)
    grading.GRADES.clear()
    pipeline = RewardPipeline(
        RewardConfig(
            components=[
                {"name": "resolved", "type": "swe_tests", "test_timeout_s": 120},
                {"name": "f2p", "type": "swe_tests", "metric": "f2p_fraction", "weight": 0.5, "test_timeout_s": 120},
            ]
        )
    )
    traj = Trajectory(metadata={"model_patch": "the patch"})
    reward = pipeline.score(traj, TASK.to_sample())
    assert traj.reward_components == {"resolved": float(resolved), "f2p": f2p_score}
    assert reward == pytest.approx(float(resolved) + 0.5 * f2p_score)
    assert traj.reward_details["resolved"]["resolved"] is resolved
    grading.GRADES.clear()


@pytest.mark.parametrize(
    ("patch", "applies", "score"),
    [("the patch", True, 1.0), ("the patch", False, 0.0), ("", True, 0.0)],  # an empty patch changed nothing
)
def test_applied_scores_a_patch_that_changed_something_and_applies(monkeypatch, patch, applies, score):
    async def fake_grade(task, patch, **kwargs):
        return GradeResult("o__r-1", False, applies, {"a": "failed"}, {})

    monkeypatch.setattr(grading, "grade_patch", fake_grade)
    grading.GRADES.clear()
    pipeline = RewardPipeline(RewardConfig(components=[{"name": "applied", "type": "swe_tests", "metric": "applied"}]))
    traj = Trajectory(metadata={"model_patch": patch})
    assert pipeline.score(traj, TASK.to_sample()) == score
    grading.GRADES.clear()


def test_an_unknown_metric_names_the_known_ones():
    with pytest.raises(Exception, match="resolved, f2p_fraction, applied"):
        RewardPipeline(RewardConfig(components=[{"name": "x", "type": "swe_tests", "metric": "passed"}]))
