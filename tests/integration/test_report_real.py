"""The report (and viewer) of a short real training run: the real model, the real hf server, 2 GRPO steps."""

from __future__ import annotations

import gzip
import json
import re

import pytest
from PIL import Image

from agentrl.cli import main
from agentrl.config import load_config
from agentrl.reports import write_report
from agentrl.reports.series import collect
from agentrl.types import Trajectory
from agentrl.viewer import build_viewer

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def train_run(hf_server_url, tmp_path_factory):
    out = tmp_path_factory.mktemp("train-run")
    code = main(
        [
            "train",
            "recipe=quickstart",
            f"rollout.urls=[{hf_server_url}]",
            "trainer.steps=2",
            "trainer.eval_every=2",
            "data.batch_size=2",
            "rollout.n=2",
            "rollout.max_tokens=16",
            f"output_dir={out}",
        ]
    )
    assert code == 0
    return out


def components() -> list[str]:
    """The quickstart recipe's reward component names, sorted."""
    return sorted(c["name"] for c in load_config(overrides=["recipe=quickstart"]).reward.components)


def png_series(path) -> list[str]:
    """Check the file is a valid PNG and return the series it records as drawn."""
    with Image.open(path) as image:
        image.verify()
    with Image.open(path) as image:
        assert image.format == "PNG" and image.size[0] > 200
        return image.text["Description"].removeprefix("series: ").split(", ")


def step_trajectories(run_dir, step: int) -> list[Trajectory]:
    with gzip.open(run_dir / "trajectories" / f"step_{step:04d}.jsonl.gz", "rt") as f:
        return [Trajectory.from_json(line) for line in f]


def test_report_of_a_real_training_run_has_the_expected_plots(train_run):
    report = write_report(train_run)
    plots = train_run / "report"
    assert png_series(plots / "reward.png") == ["rollout/reward_mean", *(f"reward/{c}" for c in components())]
    assert png_series(plots / "eval.png")[0] == "eval/reward_mean"  # then eval/success_rate once the trainer logs it
    assert png_series(plots / "response_length.png")[0] == "rollout/response_tokens_mean"
    assert png_series(plots / "turns.png") == ["rollout/turns_mean"]
    assert set(png_series(plots / "stop_reasons.png")) <= {"done", "max_tokens"}
    assert {"perf/rollout_s", "perf/train_s", "perf/weight_sync_s"} <= set(png_series(plots / "time_split.png"))
    assert "train/loss" in png_series(plots / "train.png")
    text = report.read_text()
    assert "2 training step(s)" in text
    for name in ("reward", "eval", "response_length", "turns", "stop_reasons", "time_split", "train"):
        assert f"(report/{name}.png)" in text


def test_report_series_agree_with_the_saved_trajectories(train_run):
    run = collect(train_run)
    assert [s for s, _ in run.series["eval/reward_mean"]] == [0, 2]
    for step in (1, 2):
        trajectories = step_trajectories(train_run, step)
        assert len(trajectories) == 4
        logged = dict(run.series["rollout/reward_mean"])[step]
        assert logged == pytest.approx(sum(t.reward or 0.0 for t in trajectories) / 4)
        assert sum(run.stop_reasons[step].values()) == 4
        exact = [t.reward_components["exact"] for t in trajectories if "exact" in t.reward_components]
        assert dict(run.series["reward/exact"])[step] == pytest.approx(sum(exact) / len(exact))


def test_viewer_of_a_real_training_run(train_run):
    page = build_viewer(train_run)  # the run names no model: the default model's tokenizer, checked to fit
    data = json.loads(
        re.search(r'<script type="application/json" id="agentrl-data">(.*?)</script>', page.read_text(), re.DOTALL)[1]
    )
    assert data["token_text"] is True, data["token_note"]
    (run,) = data["runs"]
    names = [s["name"] for s in run["steps"]]
    assert names == ["step 1", "step 2", "eval_step_0000", "eval_step_0002"]  # held-out evaluations listed last
    training, held_out = run["steps"][:2], run["steps"][2:]
    assert [len(g["trajs"]) for s in training for g in s["groups"]] == [2, 2, 2, 2]  # batch 2 × n 2
    assert all(len(g["trajs"]) == 1 for s in held_out for g in s["groups"])  # greedy: one per held-out row
    assert len(held_out[0]["groups"]) == len(held_out[1]["groups"]) > 0
    assert "train/loss" in run["steps"][0]["metrics"]
    for traj in data["trajs"]:
        assert sorted(traj["components"]) == components()
        generated = [s for s in traj["segments"] if s["trainable"]]
        assert generated and all(len(s["text"]) == len(s["ids"]) == len(s["lp"]) for s in generated)
