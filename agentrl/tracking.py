"""Metric logging: one `MetricsLogger` fans every step's metrics out to the run's sinks.

Sinks: `metrics.jsonl` (always; one JSON object per `log` call, `{"step": N, ...metrics}`), TensorBoard event
files in `<run dir>/tensorboard` (unless `logging.tensorboard=false`), Weights & Biases when
`logging.wandb_project` is set and MLflow when `logging.mlflow_tracking_uri` is set. wandb and mlflow are imported
only when configured; configuring one that is not installed fails at start with the `pip install` to run.

Metric names follow one convention, checked by `metric_name_ok`: a namespace, a slash, then a snake_case name.

- `rollout/…` what the agents did: `rollout/reward_mean`, `rollout/response_tokens_mean`, `rollout/turns_mean`,
  `rollout/stop_reason/<reason>` (fraction of trajectories);
- `reward/…` one series per reward component: `reward/<component>` (mean score);
- `train/…` the policy update: `train/loss`, `train/grad_norm`, `train/kl`, `train/entropy`, `train/lr`;
- `perf/…` where the time went: `perf/rollout_s`, `perf/reward_s`, `perf/train_s`, `perf/weight_sync_s` (and what
  the push moved: `perf/weight_sync_bytes`, `perf/weight_sync_{delta,full}_servers`);
- `eval/…` held-out data: `eval/reward_mean`, `eval/success_rate`.
"""

from __future__ import annotations

import json
import logging
import math
import numbers
import re
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

from agentrl.config.schema import AgentRLConfig, LoggingConfig
from agentrl.errors import UserError

logger = logging.getLogger(__name__)

METRIC_NAMESPACES = ("rollout", "reward", "train", "perf", "eval")
_NAME = re.compile(rf"^({'|'.join(METRIC_NAMESPACES)})(/[A-Za-z0-9_.@\-]+)+$")


def metric_name_ok(name: str) -> bool:
    """True when `name` follows the convention `<namespace>/<name>[/<sub>...]`.

    The namespace is one of `rollout`, `reward`, `train`, `perf`, `eval`; each part after it is made of letters,
    digits and `_ . - @` (e.g. `reward/exact_match`, `rollout/stop_reason/max_turns`, `eval/pass@1`).
    """
    return bool(_NAME.match(name))


class Sink(Protocol):
    """Where metrics go. `log` gets only finite numbers, never the step among them."""

    def log(self, metrics: Mapping[str, float], step: int) -> None: ...

    def close(self) -> None: ...


class JsonlSink:
    """Appends `{"step": step, **metrics}` to `metrics.jsonl`, flushed per line so a crash loses nothing."""

    def __init__(self, path: Path):
        self.path = path
        self._file = path.open("a", encoding="utf-8")

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        self._file.write(json.dumps({"step": step, **metrics}) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


class TensorBoardSink:
    """Scalars in TensorBoard event files (`tensorboard --logdir <run dir>/tensorboard`)."""

    def __init__(self, log_dir: Path):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as exc:  # torch raises ImportError naming tensorboard when it is missing
            raise UserError(
                "TensorBoard logging needs the `tensorboard` package: `pip install tensorboard`, "
                "or set logging.tensorboard=false"
            ) from exc
        self._writer = SummaryWriter(log_dir=str(log_dir))

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        for name, value in metrics.items():
            self._writer.add_scalar(name, value, global_step=step)
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()


class WandbSink:
    """One Weights & Biases run per `MetricsLogger`, named after the run directory."""

    def __init__(self, cfg: LoggingConfig, run_name: str, run_dir: Path, config: dict[str, Any]):
        wandb = _import_optional("wandb", "logging.wandb_project")
        self._run = wandb.init(
            project=cfg.wandb_project, entity=cfg.wandb_entity, name=run_name, dir=str(run_dir), config=config
        )

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        self._run.log(dict(metrics), step=step)

    def close(self) -> None:
        self._run.finish()


class MlflowSink:
    """One MLflow run per `MetricsLogger` in `logging.mlflow_experiment`; the config goes in as params."""

    def __init__(self, cfg: LoggingConfig, run_name: str, config: dict[str, Any]):
        self._mlflow = _import_optional("mlflow", "logging.mlflow_tracking_uri")
        self._mlflow.set_tracking_uri(cfg.mlflow_tracking_uri)
        self._mlflow.set_experiment(cfg.mlflow_experiment)
        self._run = self._mlflow.start_run(run_name=run_name)
        params = _flatten(config)
        if params:
            self._mlflow.log_params(params)

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        self._mlflow.log_metrics(dict(metrics), step=step)

    def close(self) -> None:
        self._mlflow.end_run()


class MetricsLogger:
    """Logs numeric metrics per step to every configured sink.

    Example:
        >>> with MetricsLogger(run_dir, cfg) as metrics:
        ...     metrics.log({"rollout/reward_mean": 0.5, "perf/rollout_s": 3.2}, step=1)

    Non-numeric and non-finite values are kept in `metrics.jsonl` (as JSON allows: NaN/inf are written as
    `null`) and skipped by the other sinks. A name that breaks the convention (`metric_name_ok`) is logged as
    given, with one warning per name.
    """

    def __init__(self, out_dir: Path, cfg: AgentRLConfig | None = None):
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        log_cfg = cfg.logging if cfg is not None else LoggingConfig()
        config = cfg.model_dump(mode="json", by_alias=True) if cfg is not None else {}
        run_name = self.out_dir.resolve().name
        self.sinks: list[Sink] = [JsonlSink(self.out_dir / "metrics.jsonl")]
        self._warned: set[str] = set()
        self._closed = False
        try:
            if log_cfg.tensorboard:
                self.sinks.append(TensorBoardSink(self.out_dir / "tensorboard"))
            if log_cfg.wandb_project:
                self.sinks.append(WandbSink(log_cfg, run_name, self.out_dir, config))
            if log_cfg.mlflow_tracking_uri:
                self.sinks.append(MlflowSink(log_cfg, run_name, config))
        except BaseException:
            self.close()
            raise

    @property
    def path(self) -> Path:
        """The `metrics.jsonl` file."""
        return self.out_dir / "metrics.jsonl"

    def log(self, metrics: Mapping[str, float | int], step: int) -> None:
        """Record `metrics` for training step `step` (a `step` key inside `metrics` is ignored)."""
        if self._closed:
            raise RuntimeError("MetricsLogger.log() after close(); create a new MetricsLogger")
        record = {k: v for k, v in metrics.items() if k != "step"}
        for name in record:
            if name not in self._warned and not metric_name_ok(name):
                self._warned.add(name)
                logger.warning(
                    "metric %r does not follow the naming convention <%s>/<name>",
                    name,
                    "|".join(METRIC_NAMESPACES),
                )
        numeric = {k: float(v) for k, v in record.items() if _is_number(v) and math.isfinite(float(v))}
        self.sinks[0].log({k: _jsonable(v) for k, v in record.items()}, step)
        for sink in self.sinks[1:]:
            if numeric:
                sink.log(numeric, step)

    def close(self) -> None:
        """Flush and close every sink; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        for sink in self.sinks:
            try:
                sink.close()
            except Exception:  # one failing sink must not keep the others open
                logger.exception("closing metrics sink %s failed", type(sink).__name__)

    def __enter__(self) -> MetricsLogger:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _import_optional(module: str, setting: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise UserError(
            f"{setting} is set but the `{module}` package is not installed: `pip install {module}`, or unset {setting}"
        ) from exc


def _is_number(value: object) -> bool:
    return isinstance(value, numbers.Real)  # int, float, bool and numpy scalars


def _jsonable(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        number = float(value)
        return number if math.isfinite(number) else None
    return value


def _flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flatten(value, f"{name}."))
        elif value is not None:
            out[name] = json.dumps(value) if isinstance(value, list | dict) else str(value)
    return out


__all__ = ["METRIC_NAMESPACES", "MetricsLogger", "metric_name_ok"]
