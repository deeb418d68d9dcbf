"""Builds the tool_chain task files: two dependent lookups, then the answer.

"Look up KQZV, then look up the number you get. What number is stored there?" takes two calls of `lookup`
(tools.py beside this file), the second written with what the first returned: the entry under KQZV is a
three-digit number, which is a key too, and the entry under it is the answer. Every question has its own key, so
no two episodes reach the same state after the first call: the task where per-state credit cannot come from states
repeating across a batch (GiGPO) and must come from siblings that share a state (tree rollouts forked after the
first call). Each prompt carries worked examples in the hermes format the `tool_agent` loop parses: training
prompts alternate two and one, held-out prompts have one; held-out keys never appear in training.

Run: python recipes/tool_chain/make_data.py  (writes data/train.jsonl and data/eval.jsonl, deterministic)
"""

import json
import random
import string
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from tools import entry, lookup, second_entry

CALL = '<tool_call>\n{"name": "lookup", "arguments": {"key": "%s"}}\n</tool_call>'
QUESTION = "Look up {key}, then look up the number you get. What number is stored there?"
TRAIN_SHOTS = (2, 1)
EVAL_SHOTS = 1
EXAMPLES = ["BQXR", "MTLA", "ZVEC"]


def worked_example(key: str) -> list[dict[str, str]]:
    """Ask, look up, tool result, look the result up, tool result, answer: the exchange the model should imitate."""
    first = str(entry(key))
    second = str(entry(first))
    first_result = lookup(key)
    return [
        {"role": "user", "content": QUESTION.format(key=key)},
        {"role": "assistant", "content": CALL % key},
        {"role": "tool", "content": first_result, "name": "lookup", "tool_call_id": "call_0"},
        {"role": "assistant", "content": CALL % first},
        {"role": "tool", "content": second, "name": "lookup", "tool_call_id": "call_1"},
        {"role": "assistant", "content": f"The answer is {second}."},
    ]


def row(key: str, shots: int) -> dict[str, object]:
    examples = [message for example in EXAMPLES[:shots] for message in worked_example(example)]
    prompt = [*examples, {"role": "user", "content": QUESTION.format(key=key)}]
    return {"prompt": prompt, "ground_truth": str(second_entry(key)), "data_source": "tool_chain/lookup"}


def main() -> None:
    rng = random.Random(0)
    taken = set(EXAMPLES)
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
            for i, key in enumerate(rows):
                shots = TRAIN_SHOTS[i % len(TRAIN_SHOTS)] if name == "train" else EVAL_SHOTS
                f.write(json.dumps(row(key, shots)) + "\n")
        print(f"{len(rows)} rows -> {out / f'{name}.jsonl'}")


if __name__ == "__main__":
    main()
