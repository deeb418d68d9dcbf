"""Builds the gui_agent task files: MiniWoB++ episodes, one row per (task, seed), training and held-out seeds apart.

Run: python recipes/gui_agent/make_data.py  (writes data/train.jsonl and data/eval.jsonl, deterministic)
"""

from pathlib import Path

from agentrl.gui import task_samples

TASKS = ["click-test", "click-button", "focus-text", "enter-text"]
TRAIN_SEEDS = range(0, 16)
EVAL_SEEDS = range(1000, 1004)


def main() -> None:
    out = Path(__file__).parent / "data"
    out.mkdir(exist_ok=True)
    for split, seeds in (("train", TRAIN_SEEDS), ("eval", EVAL_SEEDS)):
        rows = task_samples(TASKS, seeds, split)
        (out / f"{split}.jsonl").write_text("".join(row.to_json() + "\n" for row in rows))
        print(f"{split}: {len(rows)} episodes of {', '.join(TASKS)}")


if __name__ == "__main__":
    main()
