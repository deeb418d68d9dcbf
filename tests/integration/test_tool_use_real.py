"""Two training steps of the tool_use recipe with the real model, `hf` server and calculator tool: calculator calls
run and are graded, a held-out evaluation reports the tool-use figures, and trajectories stay token-exact."""

import gzip
import json
from pathlib import Path

import pytest

from agentrl.cli import main
from agentrl.loops.drift import check_drift
from agentrl.types import Trajectory

pytestmark = pytest.mark.integration

RECIPE_DATA = Path(__file__).resolve().parents[2] / "recipes" / "tool_use" / "data"


def test_two_tool_use_steps_call_the_calculator_and_report_tool_use(hf_server_url, default_tokenizer, tmp_path):
    """The recipe with GiGPO, one of the per-turn estimators (its run of its own would cost CI ~40 s more): the
    recipe's default estimator is trained by most other integration tests, and turn_grpo by test_turn_credit_real
    (a tool-use run of its own cost CI 75 s for what this one and that one already check)."""
    eval_rows = tmp_path / "eval.jsonl"
    eval_rows.write_text("".join((RECIPE_DATA / "eval.jsonl").read_text().splitlines(keepends=True)[:4]))
    args = [
        "train",
        "recipe=tool_use",
        f"rollout.urls=[{hf_server_url}]",
        "trainer.advantage=gigpo",
        "trainer.steps=2",
        "trainer.eval_every=2",
        "data.batch_size=1",  # 4 trajectories a step: training them is most of the time
        "rollout.n=4",
        "rollout.seed=1",
        f"data.eval_files=[{eval_rows}]",
        f"output_dir={tmp_path / 'run'}",
    ]
    assert main(args) == 0
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    steps = [m for m in metrics if "train/loss" in m or "train/skipped" in m]
    assert len(steps) == 2
    evaluation = next(m for m in metrics if "eval/success_rate" in m)
    assert {"eval/reward/correct", "eval/reward/right_call", "eval/reward/used"} <= set(evaluation)
    for step in (0, 2):  # each held-out evaluation is saved, one greedy trajectory per held-out row
        with gzip.open(tmp_path / "run" / "trajectories" / f"eval_step_{step:04d}.jsonl.gz", "rt") as f:
            held_out = [Trajectory.from_json(line) for line in f]
        logged = next(m for m in metrics if m.get("step") == step and "eval/reward_mean" in m)
        assert len(held_out) == 4
        assert sum(t.reward for t in held_out) / 4 == pytest.approx(logged["eval/reward_mean"])
    trajs = []
    for step in (1, 2):
        with gzip.open(tmp_path / "run" / "trajectories" / f"step_{step:04d}.jsonl.gz", "rt") as f:
            trajs += [Trajectory.from_json(line) for line in f]
    called = [t for t in trajs if any(m.role == "tool" and m.name == "calculator" for m in t.messages)]
    assert called, "no sampled trajectory called the calculator (two worked examples make ~45% of them call)"
    for traj in called:
        results = [m.content for m in traj.messages if m.role == "tool"]
        answer = traj.reward_details["correct"]["ground_truth"]
        assert traj.reward_components["right_call"] == float(answer in results)
        assert check_drift(default_tokenizer, traj).kind != "template"
    assert_turns_recorded(tmp_path / "run", metrics, "gigpo")


def assert_turns_recorded(run: Path, metrics: list[dict], advantage: str) -> None:
    """Both steps trained with per-turn figures, and each trajectory has one reward and one state per turn."""
    steps = [m for m in metrics if "train/turn_adv_abs_mean" in m]
    assert [s["step"] for s in steps] == [1, 2]
    for step in (1, 2):
        with gzip.open(run / "trajectories" / f"step_{step:04d}.jsonl.gz", "rt") as f:
            trajs = [Trajectory.from_json(line) for line in f]
        assert len(trajs) == 4
        for traj in trajs:  # one reward and one state per turn; the reward is the conversation's, on its last turn
            assert len(traj.turn_rewards) == len(traj.turn_states) == traj.num_turns_in_all_steps() > 0
        assert len({t.turn_states[0] for t in trajs}) == 1  # one prompt: the first turns start from one state
    if advantage == "gigpo":
        assert all(s["train/gigpo_anchor_share"] > 0 for s in steps)
