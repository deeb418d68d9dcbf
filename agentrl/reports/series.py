"""The per-step series a run report plots: from `metrics.jsonl`, completed from the saved trajectories.

`metrics.jsonl` is the primary source. What it lacks and the trajectories can tell is derived from them, per
training step: `rollout/reward_mean`, `reward/<component>` (mean score), `rollout/response_tokens_mean`,
`rollout/turns_mean`, and the stop reasons.
"""

from __future__ import annotations

import json
import math
import numbers
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from agentrl.types import Trajectory
from agentrl.viewer.runs import load_run, trajectory_files

Points = list[tuple[int, float]]


@dataclass
class RunSeries:
    """What a run's report is made of.

    Attributes:
        name: the run directory's name.
        series: metric name → (step, value) points, steps ascending.
        stop_reasons: step → count per stop reason.
        derived: names of the series computed from trajectories rather than read from `metrics.jsonl`.
        num_trajectories: trajectories read.
    """

    name: str
    series: dict[str, Points] = field(default_factory=dict)
    stop_reasons: dict[int, Counter[str]] = field(default_factory=dict)
    derived: set[str] = field(default_factory=set)
    num_trajectories: int = 0

    def matching(self, prefix: str) -> list[str]:
        """Names of the series starting with `prefix`, sorted."""
        return sorted(name for name in self.series if name.startswith(prefix))


def collect(run_dir: Path) -> RunSeries:
    """Read the series of the run at `run_dir`; missing files just mean fewer series."""
    run_dir = Path(run_dir)
    result = RunSeries(name=run_dir.resolve().name)
    metrics_file = run_dir / "metrics.jsonl"
    if metrics_file.is_file():
        result.series = read_metrics(metrics_file)
    if trajectory_files(run_dir):
        by_step: dict[int, list[Trajectory]] = defaultdict(list)
        training = [step for step in load_run(run_dir).steps if not step.held_out]
        for number, step in enumerate(training, start=1):  # held-out evaluations are in metrics.jsonl already
            by_step[step.step if step.step is not None else number].extend(step.trajectories)
        _derive(result, by_step)
    return result


def read_metrics(path: Path) -> dict[str, Points]:
    """Every finite numeric metric of `metrics.jsonl` as (step, value) points; a line without `step` counts
    as the line number. Later lines of the same step win."""
    values: dict[str, dict[int, float]] = defaultdict(dict)
    with path.open(encoding="utf-8") as f:
        for line_no, line in enumerate(f, start=1):
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by a crash
            if not isinstance(row, dict):
                continue
            step = row.get("step", line_no)
            if not isinstance(step, int):
                continue
            for name, value in row.items():
                if name != "step" and _finite_number(value):
                    values[name][step] = float(value)
    return {name: sorted(points.items()) for name, points in values.items()}


def _derive(result: RunSeries, by_step: dict[int, list[Trajectory]]) -> None:
    derived: dict[str, Points] = defaultdict(list)
    for step in sorted(by_step):
        trajectories = by_step[step]
        if not trajectories:
            continue
        result.num_trajectories += len(trajectories)
        result.stop_reasons[step] = Counter(str(t.stop_reason or "none") for t in trajectories)
        derived["rollout/reward_mean"].append((step, _mean([t.reward or 0.0 for t in trajectories])))
        lengths = [t.num_generated_tokens_in_all_steps() for t in trajectories]
        derived["rollout/response_tokens_mean"].append((step, _mean(lengths)))
        derived["rollout/turns_mean"].append((step, _mean([t.num_turns for t in trajectories])))
        for name in sorted({c for t in trajectories for c in t.reward_components}):
            scores = [t.reward_components[name] for t in trajectories if name in t.reward_components]
            derived[f"reward/{name}"].append((step, _mean(scores)))
    for name, points in derived.items():
        if name not in result.series:
            result.series[name] = points
            result.derived.add(name)


def _mean(values: list[float] | list[int]) -> float:
    return sum(values) / len(values) if values else 0.0


def _finite_number(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(float(value))
