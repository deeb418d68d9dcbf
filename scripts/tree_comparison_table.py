"""The tree comparison's runs as a table: `python scripts/tree_comparison_table.py OUT_ROOT [REACH [BASE_ARM]]`
prints, for each `<arm>-seed<S>` run that `scripts/tree_comparison.sh` wrote, its held-out success at every
evaluation, its generated tokens a step (`rollout/generated_tokens`: a tree's shared prefix counted once) and in all,
the generated tokens it spent before its first evaluation at or above REACH (default 0.8: cost to learn, the figure
to compare at equal cost), its wall time, its mean |advantage| (`train/advantage_abs_mean`: the credit's scale
against the entropy bonus) and its choice entropy over the last 4 steps (`train/choice_entropy`, where the recipe
has `trainer.entropy_choices`: near 0 a sharp policy, near ln 4 = 1.39 moves sampled about uniformly), as Markdown
rows; then each arm's last evaluation as min-max over its seeds and, with BASE_ARM (e.g. gigpo), its tokens in all
as a ratio to BASE_ARM's run of the same seed (equal cost is 1.0) and its held-out success at the last evaluation
made within the wall time of BASE_ARM's run of that seed (equal wall clock; meaningful only for runs timed side by
side on one host). OUT_ROOT:OTHER_ROOT reads the runs of both; those of OTHER_ROOT are named OTHER_ROOT's folder
name/run."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Run:
    name: str
    success: list[float]  # held-out success at each evaluation
    eval_minutes: list[float]  # minutes since training started at each evaluation
    tokens: list[float]  # generated tokens at each step
    spent: float | None  # generated tokens before the first evaluation at or above `reach` (None: never)
    minutes: float
    advantage: float  # mean |advantage| over the run's steps
    choice_entropy: float | None  # mean over the last 4 steps (None: the recipe has no entropy_choices)

    @property
    def arm(self) -> str:
        return self.name.split("-seed")[0]

    @property
    def seed(self) -> str:
        return self.name.split("-seed")[1]


def read_run(run: Path, reach: float, prefix: str = "") -> Run:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    success = [(r["step"], r["eval/success_rate"]) for r in rows if "eval/success_rate" in r]
    # minutes since training started, by step (an evaluation follows its step's training)
    wall = {r["step"]: r["perf/wall_s"] / 60 for r in rows if "perf/wall_s" in r}
    tokens = {r["step"]: r["rollout/generated_tokens"] for r in rows if "rollout/generated_tokens" in r}
    reached = next((step for step, rate in success if rate >= reach), None)
    spent = None if reached is None else sum(t for step, t in tokens.items() if step <= reached)
    advantage = [r["train/advantage_abs_mean"] for r in rows if "train/advantage_abs_mean" in r]
    entropy = [r["train/choice_entropy"] for r in rows if "train/choice_entropy" in r][-4:]
    return Run(
        prefix + run.name,
        [rate for _, rate in success],
        [wall.get(step, 0.0) for step, _ in success],
        list(tokens.values()),
        spent,
        max(wall.values(), default=0.0),
        sum(advantage) / max(len(advantage), 1),
        sum(entropy) / len(entropy) if entropy else None,
    )


def main(roots: list[Path], reach: float, base_arm: str | None) -> None:
    runs = [
        read_run(run, reach, f"{root.name}/" if i else "")
        for i, root in enumerate(roots)
        for run in sorted(root.iterdir())
        if (run / "metrics.jsonl").is_file()
    ]
    print(
        f"| run | held-out success at each evaluation | tokens a step | tokens in all | tokens to {reach} | minutes "
        "| mean abs. advantage | choice entropy, last 4 steps |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for run in runs:
        cost = "never" if run.spent is None else f"{run.spent:.0f}"
        mean = sum(run.tokens) / max(len(run.tokens), 1)
        rates = " ".join(f"{s:.2f}" for s in run.success)
        entropy = "–" if run.choice_entropy is None else f"{run.choice_entropy:.2f}"
        print(
            f"| {run.name} | {rates} | {mean:.0f} | {sum(run.tokens):.0f} | {cost} | {run.minutes:.1f} "
            f"| {run.advantage:.2f} | {entropy} |"
        )
    arms = dict.fromkeys(run.arm for run in runs)
    for arm in arms:
        last = [run.success[-1] for run in runs if run.arm == arm and run.success]
        if last:
            print(f"{arm}: last evaluation {min(last):.2f}-{max(last):.2f} over {len(last)} seeds")
    if base_arm:
        base = {run.seed: run.tokens for run in runs if run.arm == base_arm and run.tokens}
        for arm in arms:  # a pair of runs with different step counts (one still running) is left out
            pairs = [(r.tokens, base[r.seed]) for r in runs if r.arm == arm and r.seed in base]
            ratios = [sum(mine) / sum(theirs) for mine, theirs in pairs if len(mine) == len(theirs)]
            if arm != base_arm and ratios:
                spread = " ".join(f"{x:.2f}" for x in ratios)
                print(f"{arm}: tokens in all / {base_arm}'s, seed by seed: {spread}")
        print_at_base_wall_time(runs, arms, base_arm)


def print_at_base_wall_time(runs: list[Run], arms: dict[str, None], base_arm: str) -> None:
    """Each arm's held-out success at its last evaluation within the wall time of BASE_ARM's run of that seed."""
    base = {run.seed: run.minutes for run in runs if run.arm == base_arm and run.success}
    for arm in arms:
        if arm == base_arm:
            continue
        cells = []
        for run in (r for r in runs if r.arm == arm and r.seed in base):
            within = [rate for rate, at in zip(run.success, run.eval_minutes, strict=True) if at <= base[run.seed]]
            cells.append(f"s{run.seed} {within[-1]:.2f} ({run.minutes:.1f} vs {base[run.seed]:.1f} min)")
        if cells:
            print(f"{arm}: held-out success within {base_arm}'s wall time: " + ", ".join(cells))


if __name__ == "__main__":
    args = sys.argv[1:]
    main(
        [Path(p) for p in args[0].split(":")],
        float(args[1]) if len(args) > 1 else 0.8,
        args[2] if len(args) > 2 else None,
    )
