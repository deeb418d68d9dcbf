"""Builds the tool_use task files: multiply a 3-digit by a 2-digit number, with a calculator tool.

SmolLM2-135M cannot multiply 347 by 29 in its head (it answers a plausible wrong number), but it can copy the
numbers into a `calculator` call and the result into its answer. Each prompt carries worked examples in the exact
hermes format the `tool_agent` loop parses (the model does not follow the tool instructions alone), then the
question: training prompts alternate two examples and one, held-out prompts have one, so what is measured is the
model calling the tool with less scaffolding than it learned with. Held-out questions use numbers that never
appear in training.

Run: python recipes/tool_use/make_data.py  (writes data/train.jsonl and data/eval.jsonl, deterministic)
"""

import json
import random
from pathlib import Path

CALL = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "%s"}}\n</tool_call>'
QUESTION = "What is {a} * {b}?"
TRAIN_SHOTS = (2, 1)
"""Worked examples in the training prompts, alternating: with two the sampled replies call the calculator often
enough for GRPO to learn from (46 %, 12 % right), with one they almost never do (6 %, none right)."""
EVAL_SHOTS = 1
"""Worked examples in the held-out prompts: one, with which the untrained model's greedy reply never calls the tool
(with two it already does, and answers 90 % right)."""


def worked_example(a: int, b: int) -> list[dict[str, str]]:
    """Ask, call, tool result, answer: the exchange the model should imitate."""
    expression = f"{a} * {b}"
    return [
        {"role": "user", "content": QUESTION.format(a=a, b=b)},
        {"role": "assistant", "content": CALL % expression},
        {"role": "tool", "content": str(a * b), "name": "calculator", "tool_call_id": "call_0"},
        {"role": "assistant", "content": f"{expression} = {a * b}."},
    ]


EXAMPLES = [(123, 45), (608, 17), (251, 93)]


def row(a: int, b: int, shots: int) -> dict[str, object]:
    examples = [message for pair in EXAMPLES[:shots] for message in worked_example(*pair)]
    prompt = [*examples, {"role": "user", "content": QUESTION.format(a=a, b=b)}]
    return {"prompt": prompt, "ground_truth": str(a * b), "data_source": "tool_use/multiply"}


def main() -> None:
    rng = random.Random(0)
    pairs = list({(rng.randint(101, 999), rng.randint(11, 99)) for _ in range(400)})
    rng.shuffle(pairs)
    pairs = [p for p in pairs if p not in EXAMPLES]
    held_out = pairs[:32]
    seen = {n for p in held_out for n in p}
    train = [p for p in pairs[32:] if not seen & set(p)]
    out = Path(__file__).parent / "data"
    out.mkdir(exist_ok=True)
    for name, rows in (("train", train), ("eval", held_out)):
        with (out / f"{name}.jsonl").open("w") as f:
            for i, (a, b) in enumerate(rows):
                shots = TRAIN_SHOTS[i % len(TRAIN_SHOTS)] if name == "train" else EVAL_SHOTS
                f.write(json.dumps(row(a, b, shots)) + "\n")
        print(f"{len(rows)} rows -> {out / f'{name}.jsonl'}")


if __name__ == "__main__":
    main()
