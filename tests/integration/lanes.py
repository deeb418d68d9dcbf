"""The integration suite's two lanes: `scripts/test.sh` runs the `SECOND` tests in a second pytest process beside the
first, at the lowest priority, so that they take the CPU the first lane leaves idle (it waits on containers, server
starts and single-threaded Python for a quarter of its time on 2 cores).

A test belongs in the second lane only if it needs none of what the first lane's tests check machine-wide or share
one of: no Docker (some tests list every sandbox container), no Ray (one checks that no Ray head is left), no vLLM
(one server a session), no second host, and no timing (its work runs slower there, and a test that races a push or
a timeout would race differently). Each one starts from the `hf` server its lane's session shares.

`AGENTRL_TEST_LANE=first` runs every other test, `=second` only these; unset, pytest runs everything, as before.
"""

from __future__ import annotations

import os

import pytest

LANE_VARIABLE = "AGENTRL_TEST_LANE"
LANES = ("first", "second")

SECOND = (
    "test_several_policies_real.py::test_two_models_train_together_and_resume_exactly",
    "test_several_policies_real.py::test_one_policy_plays_both_roles",
    "test_several_policies_real.py::test_a_frozen_policy_serves_but_never_learns",
    "test_several_policies_real.py::test_two_lora_adapters_of_one_base_train_on_one_hf_server",
    "test_train_real.py",
    "test_tree_rollouts_real.py",
    "test_turn_credit_real.py",
    "test_textarena_real.py",
    "test_tool_use_real.py",
    "test_failed_trajectories_real.py",
    "test_report_real.py",
    "test_reasoning_gym_real.py",
    "test_verifiers_real.py",
    "test_sft_real.py",
    "test_loops_real.py",
    "test_cli_rollout.py",
)  # fmt: skip
"""Node ids under tests/integration/ (a module, or one of its tests with its parameters): CPU-bound training runs
and rollouts, about 13 minutes of the first lane's time before they moved. With the first 29 here, the second lane
ended after 16.5 minutes, the first after 36 (it had taken 42 alone)."""


def selected_lane() -> str | None:
    """The lane `AGENTRL_TEST_LANE` names, or None (every test)."""
    lane = os.environ.get(LANE_VARIABLE) or None
    if lane is not None and lane not in LANES:
        raise pytest.UsageError(f"{LANE_VARIABLE}={lane!r} names no lane: give one of {', '.join(LANES)}, or unset it")
    return lane


def in_second_lane(nodeid: str) -> bool:
    """Whether the test of node id `nodeid` (tests/integration/MODULE::TEST[PARAMS]) runs in the second lane."""
    name = nodeid.split("tests/integration/", 1)[-1]
    return any(name == entry or name.startswith(entry + ("[" if "::" in entry else "::")) for entry in SECOND)
