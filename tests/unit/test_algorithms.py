"""Advantage estimators and DAPO sampling against the papers' formulas, on hand-computed numbers."""

import math

import pytest
import torch

from agentrl.errors import AgentRLError
from agentrl.trainer.algorithms import (
    broadcast_to_tokens,
    compute_advantages,
    get_advantage,
    register_advantage,
    rewards_and_groups,
)
from agentrl.trainer.registry import ADVANTAGES
from agentrl.trainer.sampling import (
    DynamicSamplingBuffer,
    drop_zero_variance_groups,
    groups_needed,
    groups_to_request,
    overlong_penalty,
    overlong_penalty_tensor,
)
from agentrl.types import Trajectory

# Four groups, interleaved so that group ids (not positions) must define the groups:
#   a: [1, 0, 0, 1]  mean 0.5, deviations ±0.5, unbiased var = 4·0.25/3 = 1/3
#   b: [2, 4, 9]     mean 5,   deviations -3, -1, 4, unbiased var = (9 + 1 + 16)/2 = 13
#   c: [3, 3]        zero variance
#   d: [7]           a group of one
REWARDS = torch.tensor([1.0, 2.0, 0.0, 3.0, 4.0, 0.0, 7.0, 9.0, 1.0, 3.0])
GROUPS = ["a", "b", "a", "c", "b", "a", "d", "b", "a", "c"]


def expected(by_group: dict[str, list[float]]) -> list[float]:
    """Lay per-group expected values back out in the interleaved order of GROUPS."""
    queues = {g: list(v) for g, v in by_group.items()}
    return [queues[g].pop(0) for g in GROUPS]


def test_grpo_is_group_normalized():
    std_a, std_b = math.sqrt(1 / 3), math.sqrt(13)
    want = expected(
        {
            "a": [0.5 / std_a, -0.5 / std_a, -0.5 / std_a, 0.5 / std_a],
            "b": [-3 / std_b, -1 / std_b, 4 / std_b],
            "c": [0.0, 0.0],
            "d": [0.0],
        }
    )
    got = compute_advantages("grpo", REWARDS, GROUPS, eps=0.0)
    assert got.tolist() == pytest.approx(want, abs=1e-6)
    assert got.dtype == torch.float32


def test_grpo_eps_is_added_to_std():
    got = compute_advantages("grpo", torch.tensor([1.0, 0.0]), ["g", "g"], eps=0.5)
    std = math.sqrt(0.5)  # unbiased: (0.25 + 0.25) / 1
    assert got.tolist() == pytest.approx([0.5 / (std + 0.5), -0.5 / (std + 0.5)], abs=1e-6)


def test_gspo_advantage_is_grpo_advantage():
    assert torch.equal(compute_advantages("gspo", REWARDS, GROUPS), compute_advantages("grpo", REWARDS, GROUPS))


def test_dr_grpo_has_no_std_normalization():
    want = expected({"a": [0.5, -0.5, -0.5, 0.5], "b": [-3.0, -1.0, 4.0], "c": [0.0, 0.0], "d": [0.0]})
    assert compute_advantages("dr_grpo", REWARDS, GROUPS).tolist() == pytest.approx(want, abs=1e-6)


def test_rloo_uses_leave_one_out_baseline():
    want = expected(
        {
            "a": [1 - (0 + 0 + 1) / 3, 0 - (1 + 0 + 1) / 3, 0 - (1 + 0 + 1) / 3, 1 - (1 + 0 + 0) / 3],
            "b": [2 - (4 + 9) / 2, 4 - (2 + 9) / 2, 9 - (2 + 4) / 2],
            "c": [3 - 3, 3 - 3],
            "d": [0.0],
        }
    )
    assert compute_advantages("rloo", REWARDS, GROUPS).tolist() == pytest.approx(want, abs=1e-6)


def test_reinforce_pp_baseline_normalizes_group_centered_rewards_over_the_batch():
    # centered: a ±0.5 (x4), b -3 -1 4, c 0 0, d 0 → batch mean 0, unbiased var = (4·0.25 + 26) / 9 = 3
    std = math.sqrt(3)
    want = expected(
        {"a": [0.5 / std, -0.5 / std, -0.5 / std, 0.5 / std], "b": [-3 / std, -1 / std, 4 / std], "c": [0, 0], "d": [0]}
    )
    assert compute_advantages("reinforce++", REWARDS, GROUPS, eps=0.0).tolist() == pytest.approx(want, abs=1e-6)


@pytest.mark.parametrize("name", ["grpo", "dr_grpo", "rloo", "reinforce++", "gspo"])
def test_degenerate_groups_get_exactly_zero_and_no_nan(name):
    rewards = torch.tensor([0.1, 0.1, 0.1, 0.7, 0.3])  # 0.1 x3 has rounding in its float32 mean
    got = compute_advantages(name, rewards, ["z", "z", "z", "single", "other"])
    assert torch.isfinite(got).all()
    assert got.tolist() == [0.0] * 5
    assert compute_advantages(name, torch.tensor([1.0]), ["only"]).tolist() == [0.0]


def test_tensor_group_ids_and_integer_rewards():
    got = compute_advantages("dr_grpo", torch.tensor([1, 3, 10, 20]), torch.tensor([7, 7, 2, 2]))
    assert got.dtype == torch.float32
    assert got.tolist() == pytest.approx([-1.0, 1.0, -5.0, 5.0])


def test_rewards_must_be_finite_and_match_group_ids():
    with pytest.raises(ValueError, match="NaN"):
        compute_advantages("grpo", torch.tensor([1.0, float("nan")]), ["g", "g"])
    with pytest.raises(ValueError, match="group ids"):
        compute_advantages("grpo", torch.tensor([1.0, 2.0]), ["g"])


def test_broadcast_to_tokens_zeroes_masked_tokens():
    mask = torch.tensor([[1, 1, 0, 1], [0, 1, 1, 0]])
    got = broadcast_to_tokens(torch.tensor([2.0, -1.0]), mask)
    assert got.tolist() == [[2.0, 2.0, 0.0, 2.0], [0.0, -1.0, -1.0, 0.0]]
    with pytest.raises(ValueError):
        broadcast_to_tokens(torch.tensor([1.0]), mask)


def test_rewards_and_groups_from_trajectories():
    trajs = [Trajectory(group_id="p1", reward=1.0), Trajectory(group_id="p1", reward=0.0)]
    rewards, groups = rewards_and_groups(trajs)
    assert rewards.tolist() == [1.0, 0.0] and groups == ["p1", "p1"]
    with pytest.raises(AgentRLError, match="no reward"):
        rewards_and_groups([*trajs, Trajectory(group_id="p1")])


def test_registry_lists_known_names_on_error():
    assert {"grpo", "dr_grpo", "rloo", "reinforce++", "gspo"} <= set(ADVANTAGES.names())
    with pytest.raises(AgentRLError, match=r"unknown advantage estimator 'ppo'.*dr_grpo.*grpo.*reinforce\+\+.*rloo"):
        get_advantage("ppo")
    with ADVANTAGES.scoped():

        @register_advantage("constant_one")
        def one(rewards, group_ids, *, eps=1e-6):
            return torch.ones_like(rewards)

        assert get_advantage("constant_one") is one
    assert "constant_one" not in ADVANTAGES


# ------------------------------------------------------------------------------------- DAPO sampling


def scored(group: str, *rewards: float) -> list[Trajectory]:
    return [Trajectory(group_id=group, reward=r) for r in rewards]


def test_dynamic_sampling_drops_zero_variance_groups():
    trajs = scored("all_right", 1, 1, 1) + scored("mixed", 1, 0, 1) + scored("all_wrong", 0, 0) + scored("one", 1)
    trajs += scored("mixed2", 0.5, 0.25)
    kept = drop_zero_variance_groups(trajs)
    assert [[t.group_id for t in g] for g in kept] == [["mixed"] * 3, ["mixed2"] * 2]
    with pytest.raises(AgentRLError, match="no reward"):
        drop_zero_variance_groups([Trajectory(group_id="x")])


def test_groups_needed_and_requested():
    assert groups_needed(num_kept_groups=5, target_num_groups=8) == 3
    assert groups_needed(num_kept_groups=9, target_num_groups=8) == 0
    assert groups_to_request(3, keep_ratio=0.5) == 6
    assert groups_to_request(3, keep_ratio=0.4) == 8  # ceil(7.5)
    assert groups_to_request(3, keep_ratio=0.0) == 30  # floored at min_keep_ratio 0.1
    assert groups_to_request(0, keep_ratio=0.5) == 0


def test_dynamic_sampling_buffer_refills_to_target():
    buf = DynamicSamplingBuffer(target_num_groups=3)
    assert buf.add(scored("a", 1, 0) + scored("b", 1, 1) + scored("c", 0, 0) + scored("d", 0, 1)) == 2
    assert buf.needed == 1 and buf.keep_ratio == pytest.approx(2 / 4)
    assert groups_to_request(buf.needed, buf.keep_ratio) == 2
    buf.add(scored("e", 1, 0) + scored("f", 0, 1))
    assert buf.needed == 0
    batch = buf.take()
    assert [t.group_id for t in batch] == ["a", "a", "d", "d", "e", "e"]  # surplus group f discarded
    assert buf.needed == 3


def test_overlong_penalty_matches_dapo_eq13():
    # L_max = 20, L_cache = 4: no penalty up to 16, linear to -1 at 20, -1 beyond
    cases = {10: 0.0, 16: 0.0, 17: (16 - 17) / 4, 19: (16 - 19) / 4, 20: -1.0, 21: -1.0, 100: -1.0}
    for length, want in cases.items():
        assert overlong_penalty(length, max_length=20, cache_length=4) == pytest.approx(want)
    got = overlong_penalty_tensor(torch.tensor(list(cases)), max_length=20, cache_length=4)
    assert got.tolist() == pytest.approx(list(cases.values()))
    with pytest.raises(AgentRLError):
        overlong_penalty(5, max_length=20, cache_length=0)
    with pytest.raises(AgentRLError):
        overlong_penalty_tensor(torch.tensor([5]), max_length=20, cache_length=21)
