"""Builds the referential game's rows: three candidate words and a target among them.

Training rows are played by both policies together. Held-out rows use targets never trained on, each twice: once
against the scripted guesser (the describer's own score) and once against the scripted describer (the guesser's).

Run: python recipes/referential_game/make_data.py  (writes data/train.jsonl and data/eval.jsonl, deterministic)
"""

import json
import random
from pathlib import Path

WORDS = [
    "apple",
    "river",
    "candle",
    "garden",
    "marble",
    "pencil",
    "rocket",
    "silver",
    "tiger",
    "violin",
    "window",
    "yellow",
    "anchor",
    "basket",
    "castle",
    "dragon",
    "engine",
    "forest",
    "guitar",
    "harbor",
    "island",
    "jacket",
    "kettle",
    "ladder",
    "magnet",
    "needle",
    "orange",
    "planet",
    "rabbit",
    "saddle",
    "tunnel",
    "valley",
    "walnut",
    "zipper",
    "bridge",
    "cactus",
    "dolphin",
    "falcon",
    "hammer",
    "lemon",
    "mirror",
]
HELD_OUT = WORDS[-8:]  # targets of held-out rows only
TRAIN_ROWS, EVAL_TARGETS = 256, 8


def row(candidates: list[str], target: str, partner: str | None = None) -> dict:
    info = {"candidates": candidates, "target": target}
    if partner:
        info["partner"] = partner
    # the prompt is the describer's view; the loop renders each role's own prompt from extra_info
    content = f"Words: {', '.join(candidates)}. Secret: {target}."
    return {"prompt": [{"role": "user", "content": content}], "data_source": "referential_game", "extra_info": info}


def game(rng: random.Random, target: str, pool: list[str]) -> tuple[list[str], str]:
    others = rng.sample([w for w in pool if w != target], 2)
    candidates = [target, *others]
    rng.shuffle(candidates)
    return candidates, target


def main() -> None:
    rng = random.Random(0)
    train_pool = WORDS[: -len(HELD_OUT)]
    train = [row(*game(rng, rng.choice(train_pool), train_pool)) for _ in range(TRAIN_ROWS)]
    evals = []
    for target in HELD_OUT[:EVAL_TARGETS]:
        candidates, _ = game(rng, target, WORDS)
        evals += [row(candidates, target, "scripted_guesser"), row(candidates, target, "scripted_describer")]
    out = Path(__file__).parent / "data"
    out.mkdir(exist_ok=True)
    for name, rows in (("train", train), ("eval", evals)):
        with (out / f"{name}.jsonl").open("w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)


if __name__ == "__main__":
    main()
