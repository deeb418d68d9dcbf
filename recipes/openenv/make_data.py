"""Builds the OpenEnv recipe's rows: one episode per row, named by its reset seed (training and held-out apart).

Run: python recipes/openenv/make_data.py  (writes data/train.jsonl and data/eval.jsonl, deterministic)
"""

from pathlib import Path

from agentrl.data import write_seed_splits

TRAIN_SEEDS, EVAL_SEEDS = range(0, 256), range(10_000, 10_032)
INSTRUCTIONS = "Reply with exactly the word you are asked to say."


def row(seed: int) -> dict:
    return {"prompt": [{"role": "user", "content": INSTRUCTIONS}], "extra_info": {"seed": seed}}


def main() -> None:
    write_seed_splits(Path(__file__).parent / "data", row, {"train": TRAIN_SEEDS, "eval": EVAL_SEEDS})


if __name__ == "__main__":
    main()
