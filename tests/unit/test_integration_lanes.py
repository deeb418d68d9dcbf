"""The integration suite's second lane (`tests/integration/lanes.py`) names tests that exist, and none of them asks
for what the first lane's tests share or check machine-wide (Docker, Ray, vLLM, a second host)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.integration.lanes import LANE_VARIABLE, SECOND, in_second_lane, selected_lane

INTEGRATION = Path(__file__).resolve().parents[1] / "integration"
FIRST_LANE_ONLY = {"docker_client", "sandbox_base_image", "task", "easy_task", "no_leftovers", "local_ray"}
FIRST_LANE_ONLY |= {"vllm_installed", "vllm_session_server", "vllm_server", "foreign_host", "background_smokes"}


def functions(module: str) -> dict[str, list[str]]:
    """Each function of a test module, with its parameters (a test's or a fixture's: the fixtures it asks for)."""
    tree = ast.parse((INTEGRATION / module).read_text())
    return {
        node.name: [arg.arg for arg in node.args.args]
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }


@pytest.mark.parametrize("entry", SECOND)
def test_each_second_lane_entry_names_a_test_that_asks_for_nothing_the_first_lane_shares(entry):
    module, _, test = entry.partition("::")
    found = functions(module)
    if test:
        assert test in found, f"{entry}: no such test in tests/integration/{module}"
        asked = set(found[test])
    else:
        assert any(name.startswith("test_") for name in found), f"{module} has no tests"
        asked = {param for params in found.values() for param in params}
    assert not asked & FIRST_LANE_ONLY, f"{entry} asks for {sorted(asked & FIRST_LANE_ONLY)}: keep it in the first lane"


def test_a_test_is_in_the_second_lane_by_its_module_or_its_own_name():
    assert in_second_lane("tests/integration/test_train_real.py::test_ppo_mini_batches_train_on_real_ratios")
    assert in_second_lane("tests/integration/test_turn_credit_real.py::test_two_gym_steps_with_a_per_turn_estimator[x]")
    several = "tests/integration/test_several_policies_real.py::"
    assert in_second_lane(several + "test_one_policy_plays_both_roles")
    assert not in_second_lane(several + "test_two_models_train_fully_async_over_two_rollout_workers")
    assert not in_second_lane(several + "test_one_policy_plays_both_roles_again")
    assert not in_second_lane("tests/integration/test_train_real_more.py::test_x")


def test_an_unknown_lane_is_refused_with_the_lanes_there_are(monkeypatch):
    monkeypatch.setenv(LANE_VARIABLE, "third")
    with pytest.raises(pytest.UsageError, match="give one of first, second"):
        selected_lane()
    monkeypatch.delenv(LANE_VARIABLE)
    assert selected_lane() is None
