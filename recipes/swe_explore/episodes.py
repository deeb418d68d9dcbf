"""What a swe_explore evaluation's episodes did: the issue's turn statistics, and one episode as Markdown.

    python recipes/swe_explore/episodes.py RUN/trajectories/eval_step_0005.jsonl.gz
    python recipes/swe_explore/episodes.py RUN/trajectories/eval_step_0005.jsonl.gz --show keleshev__schema-typo1

The first prints one JSON line: episodes, resolved, the mean turns of the resolved ones, the share of resolved
episodes in which a test run or a file view came before the first edit, the episodes compacted (`agent.context`),
turns per episode and stop reasons. The
second prints the episode of that held-out bug from its issue on (the worked examples before it left out): each
tool call, each output, and the diff graded.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from agentrl.types import Trajectory

EXPLORING_TOOLS = ("run_tests", "view_lines", "search_code")
EDITING_TOOLS = ("edit_line",)
TOOL_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.DOTALL)


def read_episodes(path: Path) -> list[Trajectory]:
    """The trajectories of a `.jsonl.gz` (or plain `.jsonl`) file a run saved."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return [Trajectory.from_json(line) for line in f if line.strip()]


def task_start(traj: Trajectory) -> int:
    """The index of the task's own issue: the last user message (the worked examples come before it); 0 if none."""
    return max((i for i, m in enumerate(traj.messages) if m.role == "user"), default=0)


def tool_names(traj: Trajectory) -> list[str]:
    """The tools the policy called in the task, in order (a call that is not valid JSON is named `?`)."""
    names = []
    for message in traj.messages[task_start(traj) :]:
        if message.role != "assistant" or not isinstance(message.content, str):
            continue
        for body in TOOL_CALL.findall(message.content):
            try:
                names.append(str(json.loads(body).get("name", "?")))
            except json.JSONDecodeError:
                names.append("?")
    return names


def explored_before_editing(names: list[str]) -> bool:
    """Whether a test run, a file view or a search comes before the first edit."""
    first_edit = next((i for i, name in enumerate(names) if name in EDITING_TOOLS), len(names))
    return any(name in EXPLORING_TOOLS for name in names[:first_edit])


def summarize(episodes: list[Trajectory]) -> dict[str, Any]:
    """The issue's figures for one evaluation: resolved rate, turns and exploration of the resolved episodes."""
    resolved = [t for t in episodes if (t.reward or 0.0) >= 1.0]
    return {
        "episodes": len(episodes),
        "resolved": len(resolved),
        "resolved_rate": round(len(resolved) / max(len(episodes), 1), 3),
        "resolved_mean_turns": round(sum(t.num_turns for t in resolved) / max(len(resolved), 1), 2),
        "resolved_explored_first": round(
            sum(explored_before_editing(tool_names(t)) for t in resolved) / max(len(resolved), 1), 3
        ),
        "compacted": sum(bool(compactions(t)) for t in episodes),
        "turns": dict(sorted(Counter(t.num_turns for t in episodes).items())),
        "stop_reasons": dict(Counter(stop_reason(t) for t in episodes).most_common()),
    }


def compactions(traj: Trajectory) -> list[dict[str, Any]]:
    """The episode's context compactions (`agent.context`), as the trajectory records them."""
    return list((traj.metadata.get("context") or {}).get("compactions") or [])


def stop_reason(traj: Trajectory) -> str:
    return traj.stop_reason.value if traj.stop_reason is not None else "none"


def as_markdown(traj: Trajectory) -> str:
    """The episode from its issue on: the issue, each call and output, the graded diff and the reward."""
    lines = [f"**{traj.metadata.get('instance_id', '?')}**: reward {traj.reward}, {traj.num_turns} turns, "
             f"stopped by `{stop_reason(traj)}`", ""]  # fmt: skip
    for message in traj.messages[task_start(traj) :]:
        answer = f"`{message.name}` answers" if message.name else "The loop answers (no tool ran)"
        heading = {"user": "The issue", "assistant": "The policy", "tool": answer}
        lines += [f"{heading.get(message.role, message.role)}:", "", "```", str(message.content).strip(), "```", ""]
    lines += ["The diff graded (the hidden tests in a fresh container):", "", "```diff"]
    lines += [str(traj.metadata.get("model_patch", "")).strip() or "(no change)", "```"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trajectories", type=Path, help="an eval_step_*.jsonl.gz file of a run")
    parser.add_argument("--show", metavar="INSTANCE_ID", help="print this bug's episode as Markdown")
    args = parser.parse_args(argv)
    episodes = read_episodes(args.trajectories)
    if args.show is None:
        print(json.dumps(summarize(episodes)))
        return 0
    chosen = [t for t in episodes if t.metadata.get("instance_id") == args.show]
    if not chosen:
        known = ", ".join(sorted(str(t.metadata.get("instance_id")) for t in episodes))
        parser.error(f"no episode of {args.show!r} in {args.trajectories}; the file holds: {known}")
    print(as_markdown(chosen[0]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
