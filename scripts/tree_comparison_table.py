"""The tree comparison's runs as a table: `python scripts/tree_comparison_table.py OUT_ROOT [REACH]` prints, for each
`<arm>-seed<S>` run that `scripts/tree_comparison.sh` wrote, its held-out success at every evaluation, its
generated tokens a step (`rollout/generated_tokens`: a tree's shared prefix counted once), the generated tokens it
spent before its first evaluation at or above REACH (default 0.8: cost to learn, the figure to compare at equal
cost) and its wall time, as Markdown rows, then each arm's last evaluation as min-max over its seeds."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def run_row(run: Path, reach: float) -> tuple[str, list[float], float, float | None, float]:
    """(run name, held-out success at each evaluation, mean generated tokens a step, generated tokens spent before
    the first evaluation at or above `reach` (None: never), minutes)."""
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    success = [(r["step"], r["eval/success_rate"]) for r in rows if "eval/success_rate" in r]
    tokens = {r["step"]: r["rollout/generated_tokens"] for r in rows if "rollout/generated_tokens" in r}
    reached = next((step for step, rate in success if rate >= reach), None)
    spent = None if reached is None else sum(t for step, t in tokens.items() if step <= reached)
    minutes = max((r.get("perf/wall_s", 0.0) for r in rows), default=0.0) / 60  # seconds since training started
    mean = sum(tokens.values()) / max(len(tokens), 1)
    return run.name, [rate for _, rate in success], mean, spent, minutes


def main(root: Path, reach: float) -> None:
    last: dict[str, list[float]] = {}
    print(f"| run | held-out success at each evaluation | generated tokens a step | tokens to {reach} | minutes |")
    print("|---|---|---|---|---|")
    for run in sorted(p for p in root.iterdir() if (p / "metrics.jsonl").is_file()):
        name, success, tokens, spent, minutes = run_row(run, reach)
        cost = "never" if spent is None else f"{spent:.0f}"
        print(f"| {name} | {' '.join(f'{s:.2f}' for s in success)} | {tokens:.0f} | {cost} | {minutes:.1f} |")
        if success:
            last.setdefault(name.split("-seed")[0], []).append(success[-1])
    for arm, values in last.items():
        print(f"{arm}: last evaluation {min(values):.2f}-{max(values):.2f} over {len(values)} seeds")


if __name__ == "__main__":
    main(Path(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else 0.8)
