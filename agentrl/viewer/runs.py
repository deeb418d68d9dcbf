"""Finding and reading the trajectories of run directories, in every layout agentrl writes.

Layouts read:
- a training run: `metrics.jsonl` and `trajectories/step_0001.jsonl.gz` (also plain `.jsonl`), one file per step;
- a rollout run: `trajectories.jsonl` (and `summary.json`);
- a plain `.jsonl` / `.jsonl.gz` file of trajectories;
- a folder of run directories (e.g. `runs/`): every run directory directly inside it.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agentrl.errors import UserError
from agentrl.types import Trajectory

_STEP_FILE = re.compile(r"^step_(\d+)$")
_TRAJECTORY_SUFFIXES = (".jsonl", ".jsonl.gz")


@dataclass
class StepData:
    """The trajectories of one file: a training step, or a whole rollout.

    Attributes:
        name: shown in the viewer: `step 3`, or the file's stem (`trajectories`, `eval_step_0010`).
        step: the training step number when the file is `step_XXXX`, else None.
        source: the file the trajectories came from.
        trajectories: the parsed trajectories, in file order.
    """

    name: str
    step: int | None
    source: Path
    trajectories: list[Trajectory] = field(default_factory=list)

    @property
    def held_out(self) -> bool:
        """Whether the file is a held-out evaluation (`eval_step_XXXX`), not trajectories trained on."""
        return self.source.name.startswith("eval_")


@dataclass
class RunData:
    """One run directory (or one trajectory file).

    Attributes:
        name: the directory's (or file's) name.
        path: the run directory; relative image paths in messages resolve against it.
        steps: its trajectory files, steps in order.
        metrics: the lines of `metrics.jsonl`, if any.
        config: the run's saved configuration (`config.yaml` / `config.json`), if any.
        warnings: lines that could not be read, as messages for the viewer.
    """

    name: str
    path: Path
    steps: list[StepData] = field(default_factory=list)
    metrics: list[dict[str, Any]] = field(default_factory=list)
    config: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)


def load_runs(path: Path) -> list[RunData]:
    """Read the run at `path` (a run directory, a trajectory file, or a folder of runs).

    Raises:
        UserError: nothing readable is at `path`; the message lists the layouts looked for.
    """
    path = Path(path)
    if not path.exists():
        raise UserError(f"{path} does not exist; pass a run directory or a trajectories .jsonl(.gz) file")
    if path.is_file():
        if not path.name.endswith(_TRAJECTORY_SUFFIXES):
            raise UserError(f"{path} is not a trajectory file: expected a .jsonl or .jsonl.gz file")
        run = RunData(name=path.name, path=path.parent)
        run.steps.append(_read_step(path, run.warnings))
        return [run]
    if is_run_dir(path):
        return [load_run(path)]
    runs = [load_run(child) for child in sorted(path.iterdir()) if child.is_dir() and is_run_dir(child)]
    if not runs:
        raise UserError(
            f"no run found in {path}: expected metrics.jsonl, trajectories.jsonl or trajectories/step_XXXX.jsonl.gz "
            "in it (or in run directories directly inside it)"
        )
    return runs


def is_run_dir(path: Path) -> bool:
    """True when `path` holds a run's metrics or trajectories."""
    return any(
        (path / name).exists()
        for name in ("metrics.jsonl", "trajectories.jsonl", "trajectories.jsonl.gz", "trajectories")
    )


def load_run(path: Path) -> RunData:
    """Read one run directory: its trajectory files, `metrics.jsonl` and saved config."""
    run = RunData(name=path.resolve().name, path=path)
    for file in trajectory_files(path):
        run.steps.append(_read_step(file, run.warnings))
    metrics_file = path / "metrics.jsonl"
    if metrics_file.is_file():
        run.metrics = [row for _, row in _json_lines(metrics_file, run.warnings)]
    run.config = _read_config(path)
    return run


def trajectory_files(path: Path) -> list[Path]:
    """The run's trajectory files: `trajectories.jsonl(.gz)` first, then `trajectories/*` by step number."""
    files = [path / name for name in ("trajectories.jsonl", "trajectories.jsonl.gz") if (path / name).is_file()]
    folder = path / "trajectories"
    if folder.is_dir():
        found = [f for f in folder.iterdir() if f.is_file() and f.name.endswith(_TRAJECTORY_SUFFIXES)]
        files += sorted(found, key=_step_sort_key)
    return files


def _step_sort_key(file: Path) -> tuple[int, str]:
    number = _step_number(file)
    return (number if number is not None else 1 << 30, _stem(file))


def _stem(file: Path) -> str:
    name = file.name
    for suffix in (".jsonl.gz", ".jsonl"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _step_number(file: Path) -> int | None:
    match = _STEP_FILE.match(_stem(file))
    return int(match.group(1)) if match else None


def _read_step(file: Path, warnings: list[str]) -> StepData:
    number = _step_number(file)
    step = StepData(name=f"step {number}" if number is not None else _stem(file), step=number, source=file)
    for line_no, row in _json_lines(file, warnings):
        try:
            step.trajectories.append(_trajectory(row))
        except ValidationError as exc:
            warnings.append(f"{file.name}:{line_no}: not a trajectory ({exc.error_count()} problems: {exc})")
    return step


def _trajectory(row: dict[str, Any]) -> Trajectory:
    try:
        return Trajectory.model_validate(row)
    except ValidationError:
        segments = row.get("segments")
        if not isinstance(segments, list):
            raise
        # JSON has no -inf: pydantic writes a -inf logprob as null, which it then refuses to read back
        for segment in segments:
            if isinstance(segment, dict) and isinstance(segment.get("logprobs"), list):
                segment["logprobs"] = [float("-inf") if lp is None else lp for lp in segment["logprobs"]]
        return Trajectory.model_validate(row)


def _json_lines(file: Path, warnings: list[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    opener = gzip.open if file.name.endswith(".gz") else open
    try:
        with opener(file, "rt", encoding="utf-8") as f:
            for line_no, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    warnings.append(f"{file.name}:{line_no}: invalid JSON ({exc.msg})")
                    continue
                if isinstance(row, dict):
                    yield line_no, row
    except (OSError, EOFError) as exc:  # a run still being written, or a truncated .gz
        warnings.append(f"{file.name}: read stopped early ({exc})")


def _read_config(path: Path) -> dict[str, Any] | None:
    for name in ("config.yaml", "config.json"):
        file = path / name
        if not file.is_file():
            continue
        try:
            if name.endswith(".json"):
                data = json.loads(file.read_text())
            else:
                from omegaconf import OmegaConf

                data = OmegaConf.to_container(OmegaConf.load(file))
        except Exception:  # an unreadable config only costs the viewer its token texts
            return None
        return data if isinstance(data, dict) else None
    return None
