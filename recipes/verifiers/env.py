"""A verifiers environment in verifiers' own API, shipped with the recipe: one-digit sums, the answer in
<answer> tags (verifiers' XMLParser), scored by a rubric of two reward functions: the right sum (weight 1) and the
parser's own format reward (weight 0.2). Any installed verifiers environment runs the same way:
`agent.kwargs.env_id=<its name>`."""

from __future__ import annotations

import random

import verifiers as vf
from datasets import Dataset

SYSTEM_PROMPT = "Add the numbers. Think briefly, then give the sum inside <answer></answer> tags."


def _rows(count: int, seed: int) -> list[dict[str, str]]:
    rng = random.Random(seed)
    rows = []
    for _ in range(count):
        a, b = rng.randint(0, 9), rng.randint(0, 9)
        rows.append({"question": f"{a} + {b} = ?", "answer": str(a + b)})
    return rows


def load_environment(num_train: int = 512, num_eval: int = 32, seed: int = 0) -> vf.Environment:
    parser = vf.XMLParser(["answer"], answer_field="answer")

    def correct_sum(completion, answer, **kwargs) -> float:
        return 1.0 if (parser.parse_answer(completion) or "").strip() == answer else 0.0

    rubric = vf.Rubric(parser=parser)
    rubric.add_reward_func(correct_sum, weight=1.0)
    rubric.add_reward_func(parser.get_format_reward_func(), weight=0.2)
    return vf.SingleTurnEnv(
        dataset=Dataset.from_list(_rows(num_train, seed)),
        eval_dataset=Dataset.from_list(_rows(num_eval, seed + 1_000_003)),
        system_prompt=SYSTEM_PROMPT,
        parser=parser,
        rubric=rubric,
    )
