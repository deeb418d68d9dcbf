"""The tree comparison's runs as a table: `python scripts/tree_comparison_table.py OUT_ROOT` prints, for each
`<arm>-seed<S>` run that `scripts/tree_comparison.sh` wrote, its held-out success at every evaluation, its
generated tokens a step (`rollout/generated_tokens`: a tree's shared prefix counted once) and its wall time, as
Markdown rows, then each arm's last evaluation as min-max over its seeds."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def run_row(run: Path) -> tuple[str, list[float], float, float]:
    """(run name, held-out success at each evaluation, mean generated tokens a step, minutes)."""
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    success = [r["eval/success_rate"] for r in rows if "eval/success_rate" in r]
    tokens = [r["rollout/generated_tokens"] for r in rows if "rollout/generated_tokens" in r]
    minutes = max(r.get("perf/wall_s", 0.0) for r in rows) / 60  # seconds since training started
    return run.name, success, sum(tokens) / max(len(tokens), 1), minutes


def main(root: Path) -> None:
    last: dict[str, list[float]] = {}
    print("| run | held-out success at each evaluation | generated tokens a step | minutes |")
    print("|---|---|---|---|")
    for run in sorted(p for p in root.iterdir() if (p / "metrics.jsonl").is_file()):
        name, success, tokens, minutes = run_row(run)
        print(f"| {name} | {' '.join(f'{s:.2f}' for s in success)} | {tokens:.0f} | {minutes:.1f} |")
        if success:
            last.setdefault(name.split("-seed")[0], []).append(success[-1])
    for arm, values in last.items():
        print(f"{arm}: last evaluation {min(values):.2f}-{max(values):.2f} over {len(values)} seeds")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
