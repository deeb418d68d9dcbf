"""A live progress display of training steps (rich), with the latest reward and step time."""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn


class StepProgress:
    """A progress bar over training steps; each finished step also prints one summary line."""

    def __init__(self, total_steps: int, first_step: int = 1):
        self.console = Console(file=sys.stderr)
        self.progress = Progress(
            TextColumn("[bold]train"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[summary]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=self.console,
            transient=False,
        )
        self.task = self.progress.add_task("train", total=total_steps, completed=first_step - 1, summary="")

    def __enter__(self) -> StepProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def advance(self, step: int, metrics: dict[str, Any]) -> None:
        """Mark `step` done and show its headline numbers."""
        summary = step_summary(metrics)
        self.progress.update(self.task, completed=step, summary=summary)
        self.progress.console.print(f"step {step}: {summary}", soft_wrap=True, highlight=False)


def step_summary(metrics: dict[str, Any]) -> str:
    """`reward 0.41 · loss -0.012 · 14.2 s (rollout 5.1, train 8.0, sync 0.9)` from a step's metrics."""
    parts = []
    if "rollout/reward_mean" in metrics:
        parts.append(f"reward {metrics['rollout/reward_mean']:.3f}")
    if "train/loss" in metrics:
        parts.append(f"loss {metrics['train/loss']:.4g}")
    phases = [
        ("rollout", "perf/rollout_s"),
        ("reward", "perf/reward_s"),
        ("train", "perf/train_s"),
        ("sync", "perf/weight_sync_s"),
    ]
    times = [(name, metrics[key]) for name, key in phases if key in metrics]
    if times:
        total = sum(v for _, v in times)
        parts.append(f"{total:.1f} s (" + ", ".join(f"{n} {v:.1f}" for n, v in times) + ")")
    return " · ".join(parts)
