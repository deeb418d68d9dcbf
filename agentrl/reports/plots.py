"""The report's PNG plots, drawn with matplotlib's object API on the Agg canvas (no pyplot, no display, no
global backend switch). Each plot records the series it shows in the PNG's `Description` text chunk."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from agentrl.reports.series import RunSeries

TIME_PHASES = ("perf/rollout_s", "perf/reward_s", "perf/train_s", "perf/weight_sync_s")
TRAIN_FIRST = (
    "train/loss",
    "train/pg_loss",
    "train/grad_norm",
    "train/kl",
    "train/ppo_kl",
    "train/entropy",
    "train/clipfrac",
    "train/lr",
)
MAX_TRAIN_PANELS = 12


@dataclass
class Plot:
    """One written plot: its file, title and the series (or categories) it shows."""

    file: Path
    title: str
    series: list[str]


def draw_all(run: RunSeries, folder: Path) -> list[Plot]:
    """Draw every plot the run has data for into `folder`; plots without data are skipped."""
    folder.mkdir(parents=True, exist_ok=True)
    plots = []
    for name, title, draw in PLOTS:
        drawn = draw(run)
        if drawn is None:
            (folder / f"{name}.png").unlink(missing_ok=True)  # from an earlier report of this run
            continue
        figure, series = drawn
        file = folder / f"{name}.png"
        figure.suptitle(title)
        figure.savefig(file, dpi=100, metadata={"Title": title, "Description": "series: " + ", ".join(series)})
        plots.append(Plot(file=file, title=title, series=series))
    return plots


def _figure(width: float = 7.0, height: float = 4.0) -> Figure:
    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _lines(run: RunSeries, names: list[str], ylabel: str) -> tuple[Figure, list[str]] | None:
    names = [n for n in names if run.series.get(n)]
    if not names:
        return None
    figure = _figure()
    ax = figure.add_subplot()
    for name in names:
        _line(ax, run, name, label=name)
    _step_axis(ax, ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return figure, names


def _line(ax: Axes, run: RunSeries, name: str, label: str) -> None:
    steps, values = zip(*run.series[name], strict=True)
    style = "--" if name in run.derived else "-"
    ax.plot(steps, values, style, marker="o", markersize=3, label=label + (" (from trajectories)" * (style == "--")))


def reward_plot(run: RunSeries) -> tuple[Figure, list[str]] | None:
    """Total training reward, each policy's own (several policies: `rollout/<name>/reward_mean`) and each reward
    component, per step."""
    policies = [f"rollout/{p}/reward_mean" for p in _policies(run.matching("train/"))]
    return _lines(run, ["rollout/reward_mean", *policies, *run.matching("reward/")], "mean reward")


def eval_plot(run: RunSeries) -> tuple[Figure, list[str]] | None:
    """Held-out reward and success rate first, then every other `eval/…` rate (reward components, tool use; the
    `eval/failed…` counts are not rates)."""
    first = ["eval/reward_mean", "eval/success_rate"]
    rest = [s for s in run.matching("eval/") if s not in first and not s.startswith("eval/failed")]
    return _lines(run, [*first, *rest], "held-out")


def length_plot(run: RunSeries) -> tuple[Figure, list[str]] | None:
    """Generated (trainable) tokens per trajectory."""
    return _lines(run, ["rollout/response_tokens_mean", "rollout/response_tokens_max"], "tokens per trajectory")


def turns_plot(run: RunSeries) -> tuple[Figure, list[str]] | None:
    """Assistant turns per trajectory."""
    return _lines(run, ["rollout/turns_mean"], "turns per trajectory")


def stop_reason_plot(run: RunSeries) -> tuple[Figure, list[str]] | None:
    """Share of each stop reason per step, stacked (from trajectories, else `rollout/stop_reason/…` metrics)."""
    shares: dict[str, dict[int, float]] = {}
    if run.stop_reasons:
        for step, counts in run.stop_reasons.items():
            total = sum(counts.values())
            for reason, count in counts.items():
                shares.setdefault(reason, {})[step] = count / total
    else:
        for name in run.matching("rollout/stop_reason/"):
            shares[name.rsplit("/", 1)[1]] = dict(run.series[name])
    if not shares:
        return None
    steps = sorted({s for per_step in shares.values() for s in per_step})
    return _stacked(steps, shares, "share of trajectories"), sorted(shares)


def time_plot(run: RunSeries) -> tuple[Figure, list[str]] | None:
    """Seconds per step in each phase (rollout, reward, train, weight sync, and any other `perf/…_s`), stacked."""
    others = [n for n in run.matching("perf/") if _is_seconds(n) and n not in TIME_PHASES]
    names = [n for n in (*TIME_PHASES, *others) if run.series.get(n)]
    if not names:
        return None
    phases = {name: dict(run.series[name]) for name in names}
    steps = sorted({s for values in phases.values() for s in values})
    return _stacked(steps, phases, "seconds"), names


def train_plot(run: RunSeries) -> tuple[Figure, list[str]] | None:
    """The policy update's series (`train/…`: loss, grad norm, KL, ...), one small panel each, at most 12; with
    several policies, each policy's (`train/<name>/…`) side by side."""
    present = run.matching("train/")
    policies = _policies(present)
    first = [f"train/{p}/{n.split('/', 1)[1]}" if p else n for n in TRAIN_FIRST for p in [None, *policies]]
    names = [n for n in first if n in present] + [n for n in present if n not in first]
    names = names[:MAX_TRAIN_PANELS]
    if not names:
        return None
    columns = min(3, len(names))
    rows = (len(names) + columns - 1) // columns
    figure = _figure(3.2 * columns, 2.4 * rows)
    for i, name in enumerate(names, start=1):
        ax = figure.add_subplot(rows, columns, i)
        _line(ax, run, name, label=name)
        ax.set_title(name, fontsize=9)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    return figure, names


def _policies(names: list[str]) -> list[str]:
    """The policies of a run with several: those with a `train/<name>/loss` series."""
    return sorted({n.split("/")[1] for n in names if n.count("/") == 2 and n.endswith("/loss")})


def _is_seconds(name: str) -> bool:
    return name.endswith("_s") and not name.endswith("_per_s")  # perf/train_tokens_per_s is a rate


def _stacked(steps: list[int], values: dict[str, dict[int, float]], ylabel: str) -> Figure:
    figure = _figure()
    ax = figure.add_subplot()
    bottom = [0.0] * len(steps)
    for label, per_step in values.items():
        heights = [per_step.get(s, 0.0) for s in steps]
        ax.bar(steps, heights, bottom=bottom, label=label)
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    _step_axis(ax, ylabel)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))  # beside the bars, not over them
    return figure


def _step_axis(ax: Axes, ylabel: str) -> None:
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


PLOTS: list[tuple[str, str, Callable[[RunSeries], tuple[Figure, list[str]] | None]]] = [
    ("reward", "Reward (total and per component)", reward_plot),
    ("eval", "Held-out reward and success rate", eval_plot),
    ("response_length", "Response length", length_plot),
    ("turns", "Turns", turns_plot),
    ("stop_reasons", "Stop reasons", stop_reason_plot),
    ("time_split", "Time per step", time_plot),
    ("train", "Policy update", train_plot),
]
