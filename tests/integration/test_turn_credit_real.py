"""Two training steps of the gym recipe with each per-turn estimator, and of cliff_walking with GiGPO, with the
real model and `hf` server: the run completes, trajectories carry one reward and one state per turn, and the
per-turn figures are logged."""

import gzip
import json

import pytest

from agentrl.cli import main
from agentrl.types import Trajectory

pytestmark = pytest.mark.integration


def train_gym(url, out, advantage, recipe="gym", *overrides):
    args = [
        "train",
        f"recipe={recipe}",
        *overrides,
        f"rollout.urls=[{url}]",
        f"trainer.advantage={advantage}",
        "trainer.steps=2",
        "trainer.eval_every=0",
        "trainer.turn_discount=0.95",
        "data.batch_size=2",
        "rollout.n=2",
        "rollout.seed=3",
        "env.max_steps=3",  # small: training costs ~1/20 s per token on 2 CPU cores
        "agent.max_turns=3",
        f"output_dir={out}",
    ]
    assert main(args) == 0
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def trajectories(out, step):
    with gzip.open(out / "trajectories" / f"step_{step:04d}.jsonl.gz", "rt") as f:
        return [Trajectory.from_json(line) for line in f]


# the recipe's estimator and history (gigpo, each turn its own prompt), and the other estimator on the whole episode
# as one token sequence: each estimator and each turn-to-token layout runs once
@pytest.mark.parametrize(("advantage", "history"), [("gigpo", "0"), ("turn_grpo", "null")])
def test_two_gym_steps_with_a_per_turn_estimator(hf_server_url, tmp_path, advantage, history):
    # the untrained model bumps into the edge often, and with the recipe's costly bump a 2-sample group's short
    # episodes are often alike (no advantage to check): here a bump is free and does not end the episode
    bumps_free = ("env.kwargs.bump_ends_episode=false", "env.kwargs.bump_reward=0")
    steps = train_gym(hf_server_url, tmp_path, advantage, "gym", f"env.history_turns={history}", *bumps_free)
    assert [s["step"] for s in steps] == [1, 2]
    for step in (1, 2):
        for traj in trajectories(tmp_path, step):
            assert len(traj.turn_rewards) == len(traj.turn_states) == traj.num_turns_in_all_steps() > 0
            assert sum(traj.turn_rewards) == pytest.approx(traj.reward)
            # without history every turn is a token sequence of its own; with the whole episode, one sequence
            assert len(traj.step_samples()) == (traj.num_turns_in_all_steps() if history == "0" else 1)
    assert all("train/turn_adv_abs_mean" in s for s in steps)
    assert any(s["train/turn_adv_abs_mean"] > 0 and s["train/rows_trained"] > 0 for s in steps)
    if advantage == "gigpo":  # a group's episodes start from the same seeded state: first turns share an anchor
        assert all(s["train/gigpo_anchor_share"] > 0 for s in steps)


def test_two_cliff_walking_steps_with_gigpo(hf_server_url, tmp_path):
    steps = train_gym(hf_server_url, tmp_path, "gigpo", recipe="cliff_walking")
    assert [s["step"] for s in steps] == [1, 2]
    for traj in trajectories(tmp_path, 1) + trajectories(tmp_path, 2):
        assert traj.metadata["env"]["seed"] < 256  # training seeds
        assert traj.messages[0].content.startswith("You walk beside a cliff to the target T.")
        assert len(traj.turn_rewards) == traj.num_generated_turns > 0
        assert sum(traj.turn_rewards) == pytest.approx(traj.reward)
    assert all(s["train/gigpo_anchor_share"] > 0 for s in steps)
