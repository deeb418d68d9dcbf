import json

import pytest
from PIL import Image

from agentrl.errors import AgentRLError
from agentrl.reports import write_report
from agentrl.reports.__main__ import main as report_main
from agentrl.reports.series import collect
from agentrl.types import StopReason, Trajectory
from agentrl.viewer.testing import write_sample_run

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def write_metrics(run_dir, rows):
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def synthetic_rows(steps=4):
    rows = [{"step": 0, "eval/reward_mean": 0.1, "eval/success_rate": 0.0, "perf/eval_s": 5.0}]
    for s in range(1, steps + 1):
        rows.append(
            {
                "step": s,
                "rollout/reward_mean": 0.1 * s,
                "reward/exact_match": 0.05 * s,
                "reward/format": 1.0,
                "rollout/response_tokens_mean": 20.0 + s,
                "rollout/turns_mean": 1.5,
                "rollout/stop_reason/done": 0.75,
                "rollout/stop_reason/max_tokens": 0.25,
                "train/loss": 1.0 / s,
                "train/grad_norm": 0.5,
                "perf/rollout_s": 3.0,
                "perf/reward_s": 0.5,
                "perf/train_s": 2.0,
                "perf/weight_sync_s": 0.5,
                "perf/train_tokens_per_s": 100.0,  # a rate, not a phase
            }
        )
    rows.append({"step": 4, "eval/reward_mean": 0.4, "eval/success_rate": 0.5})
    return rows


def png_series(path):
    """Check the file is a valid PNG and return the series names recorded in it."""
    assert path.read_bytes()[:8] == PNG_SIGNATURE
    with Image.open(path) as image:
        image.verify()
    with Image.open(path) as image:
        assert image.size[0] > 200 and image.size[1] > 150
        description = image.text["Description"]
    assert description.startswith("series: ")
    return description.removeprefix("series: ").split(", ")


def test_report_of_synthetic_metrics_has_every_plot_with_its_series(tmp_path):
    write_metrics(tmp_path, synthetic_rows())
    report = write_report(tmp_path)
    assert report == tmp_path / "report.md"
    plots = tmp_path / "report"
    assert sorted(p.name for p in plots.iterdir()) == [
        "eval.png",
        "response_length.png",
        "reward.png",
        "stop_reasons.png",
        "time_split.png",
        "train.png",
        "turns.png",
    ]
    assert png_series(plots / "reward.png") == ["rollout/reward_mean", "reward/exact_match", "reward/format"]
    assert png_series(plots / "eval.png") == ["eval/reward_mean", "eval/success_rate"]
    assert png_series(plots / "response_length.png") == ["rollout/response_tokens_mean"]
    assert png_series(plots / "turns.png") == ["rollout/turns_mean"]
    assert png_series(plots / "stop_reasons.png") == ["done", "max_tokens"]
    assert png_series(plots / "time_split.png") == [
        "perf/rollout_s",
        "perf/reward_s",
        "perf/train_s",
        "perf/weight_sync_s",
        "perf/eval_s",
    ]
    assert png_series(plots / "train.png") == ["train/loss", "train/grad_norm"]  # the usual suspects first
    text = report.read_text()
    assert "![Reward (total and per component)](report/reward.png)" in text
    assert "| `rollout/reward_mean` | 0.1 | 0.4 | 0.1 | 0.4 | 4 |" in text
    assert "| `eval/reward_mean` | 0.1 | 0.4 | 0.1 | 0.4 | 2 |" in text
    assert "| `perf/rollout_s` | 3 | 50.0% |" in text
    assert "4 training step(s)" in text


def test_each_policy_of_a_run_with_several_has_its_curves(tmp_path):
    rows = [{"step": 0, "eval/describer/success_rate": 0.1, "eval/guesser/success_rate": 0.0}]
    for s in (1, 2):
        row = {"step": s, "rollout/reward_mean": 0.5}
        for policy in ("describer", "guesser"):
            row |= {f"rollout/{policy}/reward_mean": 0.1 * s, f"train/{policy}/loss": 1.0 / s}
            row |= {f"train/{policy}/grad_norm": 0.5, f"train/{policy}/advantage_std": 1.0}
        rows.append(row)
    write_metrics(tmp_path, rows)
    write_report(tmp_path)
    plots = tmp_path / "report"
    assert png_series(plots / "train.png")[:4] == [
        "train/describer/loss",
        "train/guesser/loss",
        "train/describer/grad_norm",
        "train/guesser/grad_norm",
    ]
    assert png_series(plots / "reward.png") == [
        "rollout/reward_mean",
        "rollout/describer/reward_mean",
        "rollout/guesser/reward_mean",
    ]
    assert png_series(plots / "eval.png") == ["eval/describer/success_rate", "eval/guesser/success_rate"]


def test_missing_series_are_skipped(tmp_path):
    write_metrics(tmp_path, [{"step": 1, "train/loss": 0.5}, {"step": 2, "train/loss": float("nan")}])
    report = write_report(tmp_path)
    assert [p.name for p in (tmp_path / "report").iterdir()] == ["train.png"]
    assert "## Stop reasons" not in report.read_text()
    assert collect(tmp_path).series == {"train/loss": [(1, 0.5)]}  # NaN is no point


def test_trajectories_fill_in_what_metrics_lack(tmp_path, tokenizer):
    write_sample_run(tmp_path, tokenizer)
    run = collect(tmp_path)
    assert run.series["rollout/reward_mean"] == [(1, 0.5), (2, 0.375)]  # from metrics.jsonl, not re-derived
    assert "rollout/reward_mean" not in run.derived
    assert run.series["reward/exact_match"] == [(1, 0.5)]
    assert run.series["reward/similarity"] == [(2, 0.375)]
    assert run.series["rollout/turns_mean"] == [(1, 2.0), (2, 1.0)]
    assert {"reward/exact_match", "rollout/turns_mean", "rollout/response_tokens_mean"} <= run.derived
    assert run.stop_reasons == {1: {"done": 1, "max_turns": 1}, 2: {"max_tokens": 2}}
    write_report(tmp_path)
    assert png_series(tmp_path / "report" / "stop_reasons.png") == ["done", "max_tokens", "max_turns"]
    assert "reward/similarity" in png_series(tmp_path / "report" / "reward.png")


def test_held_out_evaluations_stay_out_of_the_training_series(tmp_path, tokenizer):
    write_sample_run(tmp_path, tokenizer)
    trained = collect(tmp_path)
    held_out = tmp_path / "trajectories" / "eval_step_0002.jsonl"
    held_out.write_text((tmp_path / "trajectories" / "step_0002.jsonl").read_text())
    run = collect(tmp_path)
    assert run.series == trained.series and run.stop_reasons == trained.stop_reasons
    assert run.num_trajectories == trained.num_trajectories


def test_a_rollout_run_without_metrics_gets_a_report(tmp_path):
    trajectories = [
        Trajectory(reward=r, reward_components={"match": r}, stop_reason=StopReason.DONE, num_turns=1)
        for r in (0.0, 1.0)
    ]
    (tmp_path / "trajectories.jsonl").write_text("".join(t.to_json() + "\n" for t in trajectories))
    text = write_report(tmp_path).read_text()
    assert "| done | 2 | 100.0% |" in text
    assert png_series(tmp_path / "report" / "reward.png") == ["rollout/reward_mean", "reward/match"]


def test_report_can_be_written_again_as_the_run_goes_on(tmp_path):
    write_metrics(tmp_path, synthetic_rows(steps=2))
    write_report(tmp_path)
    write_metrics(tmp_path, synthetic_rows(steps=3))
    assert "3 training step(s)" in write_report(tmp_path).read_text()


def test_nothing_to_report_is_a_clear_error(tmp_path):
    with pytest.raises(AgentRLError, match="no metrics.jsonl and no trajectories"):
        write_report(tmp_path)
    with pytest.raises(AgentRLError, match="not a directory"):
        write_report(tmp_path / "missing")


def test_module_entry_point(tmp_path, capsys):
    write_metrics(tmp_path, synthetic_rows(steps=1))
    assert report_main([str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "report.md")
    assert report_main([str(tmp_path / "missing")]) == 2
    assert report_main([]) == 2


def test_cli_report_command(tmp_path, capsys):
    from agentrl.cli import main as cli_main

    write_metrics(tmp_path, synthetic_rows(steps=2))
    assert cli_main(["report", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == f"report written to {tmp_path / 'report.md'}"
    assert (tmp_path / "report.md").is_file()
    assert cli_main(["report", str(tmp_path / "missing")]) == 2
    assert "missing" in capsys.readouterr().err
