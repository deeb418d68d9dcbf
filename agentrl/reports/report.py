"""`write_report(run_dir)`: `report.md` and `report/*.png` summarizing a run, step by step."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

from agentrl.errors import UserError
from agentrl.reports.plots import TIME_PHASES, Plot, draw_all
from agentrl.reports.series import RunSeries, collect

SUMMARY_SERIES = (
    "rollout/reward_mean",
    "eval/reward_mean",
    "eval/success_rate",
    "rollout/response_tokens_mean",
    "rollout/turns_mean",
    "train/loss",
)


def write_report(run_dir: Path) -> Path:
    """Write `<run_dir>/report.md` with plots in `<run_dir>/report/`; return the path of `report.md`.

    Plots: reward (total and per component `reward/<name>`), held-out reward / success rate (`eval/…`), response
    length, turns, stop reasons and the time split per step (`perf/…_s`), and the `train/…` series. A plot whose
    series are all missing is left out. Callable on any run directory, finished or not, as often as wanted.

    Raises:
        UserError: the directory has neither `metrics.jsonl` nor trajectories.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UserError(f"{run_dir} is not a directory; pass a run directory")
    run = collect(run_dir)
    if not run.series and not run.stop_reasons:
        raise UserError(f"nothing to report in {run_dir}: it has no metrics.jsonl and no trajectories")
    plots = draw_all(run, run_dir / "report")
    path = run_dir / "report.md"
    path.write_text(render_markdown(run, plots, run_dir), encoding="utf-8")
    return path


def render_markdown(run: RunSeries, plots: list[Plot], run_dir: Path) -> str:
    """The report's text: summary tables, then each plot with the series it shows."""
    steps = {s for name, points in run.series.items() if name.startswith(("rollout/", "train/")) for s, _ in points}
    steps |= set(run.stop_reasons)
    lines = [
        f"# Run report: {run.name}",
        "",
        f"{len(steps)} training step(s), {run.num_trajectories} trajectories read; "
        f"written {time.strftime('%Y-%m-%d %H:%M:%S')}. Dashed lines are computed from the saved trajectories.",
        "",
    ]
    lines += _summary_table(run)
    lines += _stop_reason_table(run)
    lines += _time_table(run)
    lines += ["## Plots", ""]
    for plot in plots:
        relative = plot.file.relative_to(run_dir).as_posix()
        lines += [f"### {plot.title}", "", f"![{plot.title}]({relative})", ""]
        lines += ["Series: " + ", ".join(f"`{s}`" for s in plot.series), ""]
    if not plots:
        lines += ["No series to plot.", ""]
    return "\n".join(lines)


def _summary_table(run: RunSeries) -> list[str]:
    names = [n for n in SUMMARY_SERIES if n in run.series]
    names += [n for n in run.matching("reward/") if n not in names]
    if not names:
        return []
    lines = ["## Summary", "", "| series | first | last | min | max | steps |", "|---|---:|---:|---:|---:|---:|"]
    for name in names:
        values = [v for _, v in run.series[name]]
        cells = [_num(values[0]), _num(values[-1]), _num(min(values)), _num(max(values)), str(len(values))]
        lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
    return [*lines, ""]


def _stop_reason_table(run: RunSeries) -> list[str]:
    totals: Counter[str] = Counter()
    for counts in run.stop_reasons.values():
        totals.update(counts)
    if not totals:
        return []
    n = sum(totals.values())
    lines = ["## Stop reasons", "", "| stop reason | trajectories | share |", "|---|---:|---:|"]
    lines += [f"| {reason} | {count} | {count / n:.1%} |" for reason, count in totals.most_common()]
    return [*lines, ""]


def _time_table(run: RunSeries) -> list[str]:
    phases = [n for n in TIME_PHASES if n in run.series]
    if not phases:
        return []
    totals = {n: sum(v for _, v in run.series[n]) for n in phases}
    whole = sum(totals.values()) or 1.0
    lines = ["## Time per step", "", "| phase | mean s/step | share |", "|---|---:|---:|"]
    for name in phases:
        mean = totals[name] / len(run.series[name])
        lines.append(f"| `{name}` | {mean:.3g} | {totals[name] / whole:.1%} |")
    return [*lines, ""]


def _num(value: float) -> str:
    return f"{value:.4g}"
