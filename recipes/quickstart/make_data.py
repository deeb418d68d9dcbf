"""Builds the quickstart task files: echo a word back, exactly and alone (a task a 135M model can learn fast).

Run: python recipes/quickstart/make_data.py  (writes data/train.jsonl and data/eval.jsonl, deterministic)
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
    "quartz",
    "rabbit",
    "saddle",
    "tunnel",
    "umbrella",
    "valley",
    "walnut",
    "zipper",
    "bridge",
    "cactus",
    "dolphin",
    "falcon",
    "glacier",
    "hammer",
    "igloo",
    "jungle",
    "koala",
    "lemon",
    "mirror",
    "nectar",
    "oyster",
    "parrot",
    "quiver",
    "rainbow",
    "sunset",
    "tomato",
    "unicorn",
    "velvet",
    "wizard",
    "yogurt",
    "zebra",
]
TEMPLATES = [
    "Repeat this word exactly, and nothing else: {w}",
    "Say only the word {w}.",
    "Echo back the following word with no other text: {w}",
    "Reply with just one word: {w}",
]


def rows(words: list[str], rng: random.Random) -> list[dict]:
    return [
        {
            "prompt": [{"role": "user", "content": rng.choice(TEMPLATES).format(w=w)}],
            "data_source": "quickstart/echo",
            "ground_truth": w,
        }
        for w in words
    ]


def main() -> None:
    rng = random.Random(0)
    words = WORDS[:]
    rng.shuffle(words)
    out = Path(__file__).parent / "data"
    out.mkdir(exist_ok=True)
    for name, part in (("eval", words[:16]), ("train", words[16:])):
        with (out / f"{name}.jsonl").open("w") as f:
            for row in rows(part, rng):
                f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
