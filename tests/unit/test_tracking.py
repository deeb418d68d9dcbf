import json
import logging
import math
import sys
import types

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from agentrl.config import AgentRLConfig
from agentrl.errors import AgentRLError
from agentrl.tracking import MetricsLogger, metric_name_ok


def config(**logging_fields) -> AgentRLConfig:
    return AgentRLConfig.model_validate({"logging": logging_fields})


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_jsonl_gets_one_line_per_log_with_the_step(tmp_path):
    with MetricsLogger(tmp_path) as metrics:
        metrics.log({"rollout/reward_mean": 0.25, "train/loss": 1.5}, step=1)
        metrics.log({"step": 99, "eval/reward_mean": 0.5}, step=2)
    assert read_jsonl(tmp_path / "metrics.jsonl") == [
        {"step": 1, "rollout/reward_mean": 0.25, "train/loss": 1.5},
        {"step": 2, "eval/reward_mean": 0.5},
    ]


def test_jsonl_appends_to_an_existing_file_and_writes_non_finite_as_null(tmp_path):
    (tmp_path / "metrics.jsonl").write_text('{"step": 0, "eval/reward_mean": 0.1}\n')
    with MetricsLogger(tmp_path, config(tensorboard=False)) as metrics:
        metrics.log({"train/loss": math.nan, "train/kl": math.inf, "rollout/errors": 2}, step=1)
    rows = read_jsonl(tmp_path / "metrics.jsonl")
    assert rows == [
        {"step": 0, "eval/reward_mean": 0.1},
        {"step": 1, "train/loss": None, "train/kl": None, "rollout/errors": 2},
    ]


def test_tensorboard_event_files_hold_the_scalars(tmp_path):
    with MetricsLogger(tmp_path, config()) as metrics:
        for step in (1, 2, 3):
            metrics.log({"rollout/reward_mean": step / 10, "train/loss": math.nan, "note": "text"}, step=step)
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    assert events.Tags()["scalars"] == ["rollout/reward_mean"]  # NaN and text are skipped
    points = events.Scalars("rollout/reward_mean")
    assert [p.step for p in points] == [1, 2, 3]
    assert [round(p.value, 5) for p in points] == [0.1, 0.2, 0.3]


def test_tensorboard_can_be_switched_off(tmp_path):
    with MetricsLogger(tmp_path, config(tensorboard=False)) as metrics:
        metrics.log({"train/loss": 1.0}, step=1)
    assert not (tmp_path / "tensorboard").exists()


@pytest.mark.parametrize(
    "name",
    [
        "rollout/reward_mean",
        "reward/exact_match",
        "train/loss",
        "perf/rollout_s",
        "eval/pass@1",
        "rollout/stop_reason/max_turns",
    ],
)
def test_conventional_names_pass(name):
    assert metric_name_ok(name)


@pytest.mark.parametrize(
    "name", ["loss", "reward_mean", "training/loss", "train/", "train//loss", "Train/loss", "perf/a b"]
)
def test_unconventional_names_fail(name):
    assert not metric_name_ok(name)


def test_an_unconventional_name_is_logged_with_one_warning(tmp_path, caplog):
    with (
        caplog.at_level(logging.WARNING, logger="agentrl.tracking"),
        MetricsLogger(tmp_path, config(tensorboard=False)) as m,
    ):
        m.log({"loss": 1.0}, step=1)
        m.log({"loss": 2.0}, step=2)
    assert [r.getMessage() for r in caplog.records].count(
        "metric 'loss' does not follow the naming convention <rollout|reward|train|perf|eval>/<name>"
    ) == 1
    assert [row["loss"] for row in read_jsonl(tmp_path / "metrics.jsonl")] == [1.0, 2.0]


def test_log_after_close_is_an_error_and_close_is_idempotent(tmp_path):
    metrics = MetricsLogger(tmp_path, config(tensorboard=False))
    metrics.close()
    metrics.close()
    with pytest.raises(RuntimeError, match="after close"):
        metrics.log({"train/loss": 1.0}, step=1)


@pytest.mark.parametrize(
    ("fields", "module"),
    [({"wandb_project": "p"}, "wandb"), ({"mlflow_tracking_uri": "file:///tmp/x"}, "mlflow")],
)
def test_configured_but_missing_backend_fails_with_the_install_command(tmp_path, monkeypatch, fields, module):
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` raise ImportError
    with pytest.raises(AgentRLError, match=rf"`pip install {module}`"):
        MetricsLogger(tmp_path, config(tensorboard=False, **fields))


class RecordingWandbForTests(types.ModuleType):
    """Stands in for the wandb module and records what the logger calls."""

    def __init__(self):
        super().__init__("wandb")
        self.calls = []

    def init(self, **kwargs):
        self.calls.append(("init", kwargs))
        return self

    def log(self, metrics, step):
        self.calls.append(("log", metrics, step))

    def finish(self):
        self.calls.append(("finish",))


class RecordingMlflowForTests(types.ModuleType):
    """Stands in for the mlflow module and records what the logger calls."""

    def __init__(self):
        super().__init__("mlflow")
        self.calls = []

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda *args, **kwargs: self.calls.append((name, args, kwargs))


def test_wandb_and_mlflow_get_the_numeric_metrics_when_configured(tmp_path, monkeypatch):
    wandb, mlflow = RecordingWandbForTests(), RecordingMlflowForTests()
    monkeypatch.setitem(sys.modules, "wandb", wandb)
    monkeypatch.setitem(sys.modules, "mlflow", mlflow)
    cfg = config(tensorboard=False, wandb_project="proj", mlflow_tracking_uri="file:///tmp/mlruns")
    run_dir = tmp_path / "my-run"
    with MetricsLogger(run_dir, cfg) as metrics:
        metrics.log({"train/loss": 0.5, "note": "text"}, step=3)
    init = wandb.calls[0][1]
    assert (init["project"], init["name"], init["config"]["logging"]["wandb_project"]) == ("proj", "my-run", "proj")
    assert wandb.calls[1:] == [("log", {"train/loss": 0.5}, 3), ("finish",)]
    names = [c[0] for c in mlflow.calls]
    assert names == ["set_tracking_uri", "set_experiment", "start_run", "log_params", "log_metrics", "end_run"]
    assert mlflow.calls[2][2] == {"run_name": "my-run"}
    assert mlflow.calls[3][1][0]["trainer.steps"] == "10"
    assert mlflow.calls[4] == ("log_metrics", ({"train/loss": 0.5},), {"step": 3})
