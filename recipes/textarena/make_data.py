"""Builds the TextArena recipe's rows: one game per row, named by its seed (training and held-out seeds apart).

Run: python recipes/textarena/make_data.py  (writes data/train.jsonl and data/eval.jsonl, deterministic)
"""

from pathlib import Path

from agentrl.data import write_seed_splits

TRAIN_SEEDS, EVAL_SEEDS = range(0, 256), range(10_000, 10_032)


def row(seed: int) -> dict:
    # the loop asks the game itself for the first observation; the prompt only names the game for the viewer
    return {"prompt": [{"role": "user", "content": f"TextArena game, seed {seed}"}], "extra_info": {"seed": seed}}


def main() -> None:
    write_seed_splits(Path(__file__).parent / "data", row, {"train": TRAIN_SEEDS, "eval": EVAL_SEEDS})


if __name__ == "__main__":
    main()
