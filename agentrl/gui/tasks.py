"""Datasets of MiniWoB episodes: one row per (task, seed), played by the `gui_agent` loop."""

from __future__ import annotations

from agentrl.types import Sample


def task_samples(tasks: list[str], seeds: range, split: str) -> list[Sample]:
    """Rows for every task and seed, task by task.

    Args:
        tasks: MiniWoB task names (`click-test`, `enter-text`, ...).
        seeds: the episodes' seeds; keep training and held-out ranges disjoint.
        split: `train` or `eval`, recorded in the row.
    """
    return [
        Sample(
            prompt=[],
            agent_name="gui_agent",
            data_source=f"miniwob/{task}",
            extra_info={"task": task, "seed": seed, "split": split},
            id=f"{task}/{split}/{seed}",
        )
        for task in tasks
        for seed in seeds
    ]
