"""Builds the TextArena recipe's rows: one game per row, named by its seed (training and held-out seeds apart).

Run: python recipes/textarena/make_data.py  (writes data/train.jsonl and data/eval.jsonl, deterministic)
"""

import json
from pathlib import Path

TRAIN_SEEDS, EVAL_SEEDS = range(0, 256), range(10_000, 10_032)


def row(seed: int) -> dict:
    # the loop asks the game itself for the first observation; the prompt only names the game for the viewer
    return {"prompt": [{"role": "user", "content": f"TextArena game, seed {seed}"}], "extra_info": {"seed": seed}}


def main() -> None:
    out = Path(__file__).parent / "data"
    out.mkdir(exist_ok=True)
    for name, seeds in (("train", TRAIN_SEEDS), ("eval", EVAL_SEEDS)):
        with (out / f"{name}.jsonl").open("w") as f:
            f.writelines(json.dumps(row(s)) + "\n" for s in seeds)


if __name__ == "__main__":
    main()
