"""Why a tree comparison's runs learn or not, from their saved trajectories:
`python scripts/tree_diagnostics.py RUN_DIR... [--success 1.0]`.

For each run (an `output_dir` of `agentrl train`, e.g. `OUT/treefill-seed1` of `scripts/tree_comparison.sh`) it
prints, over its training steps:
- prompt groups whose episodes all got the same reward (GRPO's inter-episode term is 0 there);
- for tree rollouts, branch points after a turn (children forked once the episode played a turn or more, at any
  depth: a tree forked only after its first turn has one at its root) whose leaves all got the same reward (the
  intra-tree term is 0 there), and those whose leaves went on with exactly the same messages;
- success (reward at or above `--success`) by the number of worked examples in the prompt (the user turns before
  the question), in training and at the last held-out evaluation: few-shot recipes (tool_use, tool_chain) mix
  prompts with different numbers of examples, and a policy can learn one shape and not the other.
"""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict
from pathlib import Path

from agentrl.types import Trajectory
from agentrl.viewer.runs import StepData, load_run


def same_reward_share(groups: dict) -> str:
    sized = [g for g in groups.values() if len(g) >= 2]
    return f"{sum(len(set(g)) == 1 for g in sized)}/{len(sized)}"


def branch_points(steps: list[StepData]) -> tuple[dict, dict]:
    """Rewards and continuations of the leaves below each branch point after a turn, keyed by step, tree and the
    path to the branch point (a fork before the first turn compares first turns, as flat episodes do: left out)."""
    rewards, continuations = defaultdict(list), defaultdict(list)
    for step in steps:
        for traj in step.trajectories:
            tree = traj.metadata.get("tree") or {"path": [], "branch_turns": []}
            for depth, turn in enumerate(tree["branch_turns"]):
                if turn >= 1:
                    key = (step.step, tree["id"], tuple(tree["path"][:depth]))
                    rewards[key].append(traj.reward)
                    continuations[key].append(str(traj.messages))
    return rewards, continuations


def by_examples(trajectories: list[Trajectory], success: float) -> str:
    seen, won = Counter(), Counter()
    for traj in trajectories:
        examples = sum(m.role == "user" for m in traj.messages) - 1
        seen[examples] += 1
        won[examples] += traj.reward >= success
    return ", ".join(f"{k} example(s) {won[k]}/{seen[k]}" for k in sorted(seen))


def report(path: Path, success: float) -> None:
    run = load_run(path)
    steps = [s for s in run.steps if s.step is not None]  # training steps, not held-out evaluations
    trained = [t for s in steps for t in s.trajectories]
    groups = defaultdict(list)
    for step in steps:
        for traj in step.trajectories:
            groups[(step.step, traj.group_id)].append(traj.reward)
    print(f"{run.name}: {len(steps)} steps, {len(trained)} episodes")
    print(f"  prompt groups with one reward for all: {same_reward_share(groups)}")
    rewards, continuations = branch_points(steps)
    if rewards:
        identical = sum(len(set(c)) == 1 for c in continuations.values() if len(c) >= 2)
        print(f"  branch points after a turn with one reward for all leaves: {same_reward_share(rewards)}"
              f" (children identical: {identical})")  # fmt: skip
    print(f"  training success by worked examples: {by_examples(trained, success)}")
    evals = [s for s in run.steps if s.held_out]
    if evals:
        print(f"  held-out success at {evals[-1].name}: {by_examples(evals[-1].trajectories, success)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--success", type=float, default=1.0, help="reward at or above which an episode succeeded")
    args = parser.parse_args()
    for run in args.runs:
        report(run, args.success)
