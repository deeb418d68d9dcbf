"""Builds the tool_pick task files: one lookup every episode writes alike, then a choice of two keys, then the answer.

"Look up KQZV. It gives two keys: look up the second one. What number is stored there?" takes a lookup of the
question's key (the same call in every episode of the prompt), whose result names two keys, then a lookup of the
first or the second of them (drawn per question), then that number as the answer. The decisive turn, the choice,
comes after a turn the episodes share: a tree forked after the first lookup samples the choice from one true state,
and at flat's tokens it can sample it more often, since the first turn is generated once. Every prompt, training
and held-out alike, carries the same two worked examples in the hermes format the `tool_agent` loop parses (one
asks for the first key, one for the second); held-out keys never appear in training.

Run: python recipes/tool_pick/make_data.py  (writes data/train.jsonl and data/eval.jsonl, deterministic)
"""

import json
import random
import string
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from tools import answer, drawer, lookup

CALL = '<tool_call>\n{"name": "lookup", "arguments": {"key": "%s"}}\n</tool_call>'
QUESTION = "Look up {key}. It gives two keys: look up the {which} one. What number is stored there?"
ORDINALS = ("first", "second")
EXAMPLES = [("BQXR", 1), ("ZVEC", 0)]  # (key, which of its two keys to look up)


def question(key: str, which: int) -> str:
    return QUESTION.format(key=key, which=ORDINALS[which])


def worked_example(key: str, which: int) -> list[dict[str, str]]:
    """Ask, look up the key, tool result, look up the chosen one of its two keys, tool result, answer."""
    chosen = str(drawer(key)[which])
    return [
        {"role": "user", "content": question(key, which)},
        {"role": "assistant", "content": CALL % key},
        {"role": "tool", "content": lookup(key), "name": "lookup", "tool_call_id": "call_0"},
        {"role": "assistant", "content": CALL % chosen},
        {"role": "tool", "content": lookup(chosen), "name": "lookup", "tool_call_id": "call_1"},
        {"role": "assistant", "content": f"The answer is {answer(key, which)}."},
    ]


def row(key: str, which: int) -> dict[str, object]:
    examples = [message for example in EXAMPLES for message in worked_example(*example)]
    prompt = [*examples, {"role": "user", "content": question(key, which)}]
    return {"prompt": prompt, "ground_truth": str(answer(key, which)), "data_source": "tool_pick/lookup"}


def main() -> None:
    rng = random.Random(0)
    taken = {key for key, _ in EXAMPLES}
    keys: list[str] = []
    while len(keys) < 288:
        key = "".join(rng.choices(string.ascii_uppercase, k=4))
        if key not in taken:
            taken.add(key)
            keys.append(key)
    held_out, train = keys[:32], keys[32:]
    out = Path(__file__).parent / "data"
    out.mkdir(exist_ok=True)
    for name, rows in (("train", train), ("eval", held_out)):
        with (out / f"{name}.jsonl").open("w") as f:
            for key in rows:
                f.write(json.dumps(row(key, rng.randrange(2))) + "\n")
        print(f"{len(rows)} rows -> {out / f'{name}.jsonl'}")


if __name__ == "__main__":
    main()
