"""Success per MiniWoB task from an `agentrl eval` run directory.

python -m agentrl.gui.report runs/gui_agent-eval-...     # prints a JSON object: task -> episodes, successes, rate
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def success_by_task(rows: Iterable[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Group `results.jsonl` rows by task (the part of the sample id before the first `/`).

    A row counts as a success when it is `resolved` (the loop's `reward_details["env"]["resolved"]`).
    """
    out: dict[str, dict[str, float]] = {}
    for row in rows:
        task = str(row.get("id") or "?").split("/", 1)[0]
        entry = out.setdefault(task, {"episodes": 0, "successes": 0, "success_rate": 0.0})
        entry["episodes"] += 1
        entry["successes"] += bool(row.get("resolved"))
    for entry in out.values():
        entry["success_rate"] = entry["successes"] / entry["episodes"]
    return dict(sorted(out.items()))


def read_results(run_dir: str | Path) -> list[dict[str, Any]]:
    """The rows of `<run_dir>/results.jsonl`.

    Raises:
        FileNotFoundError: the folder has no results.jsonl (give the folder `agentrl eval` printed).
    """
    path = Path(run_dir) / "results.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: give the run directory that `agentrl eval` printed")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m agentrl.gui.report RUN_DIR", file=sys.stderr)
        return 2
    print(json.dumps(success_by_task(read_results(args[0])), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
