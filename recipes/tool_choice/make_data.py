"""Builds the tool_choice task files: choose one of two keys, two dependent lookups, then the answer.

"Keys: KQZV, MTLA. Look up the second key, then look up the number you get. What number is stored there?" takes
the right key out of two (the first or the second, at random), then two calls of the tool_chain recipe's `lookup`
(../tool_chain/tools.py), the second written with what the first returned, then that entry as the answer. The
choice makes the first turn matter and differ between episodes of one prompt: flat episodes part before the
decisive second lookup, while a tree forked after the first lookup compares second lookups that start from the
same result. Every prompt, training and held-out alike, carries the same two worked examples in the hermes format
the `tool_agent` loop parses (one asks for the first key, one for the second); held-out keys never appear in
training.

Run: python recipes/tool_choice/make_data.py  (writes data/train.jsonl and data/eval.jsonl, deterministic)
"""

import json
import random
import string
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "tool_chain"))
from tools import entry, lookup, second_entry

CALL = '<tool_call>\n{"name": "lookup", "arguments": {"key": "%s"}}\n</tool_call>'
QUESTION = "Keys: {keys}. Look up the {which} key, then look up the number you get. What number is stored there?"
ORDINALS = ("first", "second")
EXAMPLES = [(("BQXR", "MTLA"), 0), (("ZVEC", "HJOP"), 1)]  # (keys, which one to look up)


def question(keys: tuple[str, str], which: int) -> str:
    return QUESTION.format(keys=", ".join(keys), which=ORDINALS[which])


def worked_example(keys: tuple[str, str], which: int) -> list[dict[str, str]]:
    """Ask, look up the chosen key, tool result, look the result up, tool result, answer."""
    key = keys[which]
    first = str(entry(key))
    second = str(entry(first))
    return [
        {"role": "user", "content": question(keys, which)},
        {"role": "assistant", "content": CALL % key},
        {"role": "tool", "content": lookup(key), "name": "lookup", "tool_call_id": "call_0"},
        {"role": "assistant", "content": CALL % first},
        {"role": "tool", "content": second, "name": "lookup", "tool_call_id": "call_1"},
        {"role": "assistant", "content": f"The answer is {second}."},
    ]


def row(keys: tuple[str, str], which: int) -> dict[str, object]:
    examples = [message for example in EXAMPLES for message in worked_example(*example)]
    prompt = [*examples, {"role": "user", "content": question(keys, which)}]
    return {"prompt": prompt, "ground_truth": str(second_entry(keys[which])), "data_source": "tool_choice/lookup"}


def main() -> None:
    rng = random.Random(0)
    taken = {key for keys, _ in EXAMPLES for key in keys}
    keys: list[str] = []
    while len(keys) < 2 * 288:
        key = "".join(rng.choices(string.ascii_uppercase, k=4))
        if key not in taken:
            taken.add(key)
            keys.append(key)
    pairs = [(keys[i], keys[i + 1]) for i in range(0, len(keys), 2)]
    held_out, train = pairs[:32], pairs[32:]
    out = Path(__file__).parent / "data"
    out.mkdir(exist_ok=True)
    for name, rows in (("train", train), ("eval", held_out)):
        with (out / f"{name}.jsonl").open("w") as f:
            for pair in rows:
                f.write(json.dumps(row(pair, rng.randrange(2))) + "\n")
        print(f"{len(rows)} rows -> {out / f'{name}.jsonl'}")


if __name__ == "__main__":
    main()
