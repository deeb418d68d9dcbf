"""verifiers environments written for the tests, in verifiers' own API: `load_environment(kind=...)`.

- `single`: a SingleTurnEnv asking for a colour word, scored by a rubric (a weighted reward function and a
  zero-weight metric) through verifiers' XMLParser;
- `tool`: a ToolEnv whose `add` tool returns a sum; the reward is the sum in the final answer;
- `broken`: a MultiTurnEnv whose setup_state raises (the environment fails, not the model).
"""

from __future__ import annotations

import verifiers as vf
from datasets import Dataset

COLOURS = ["red", "blue", "green", "black", "white", "yellow", "pink", "brown"]


def load_environment(kind: str = "single", size: int = 8) -> vf.Environment:
    if kind == "single":
        return _single(size)
    if kind == "tool":
        return _tool(size)
    if kind == "broken":
        return _Broken(dataset=_colour_rows(size), rubric=_colour_rubric(vf.Parser()))
    raise ValueError(f"unknown kind {kind!r}")


def _colour_rows(size: int) -> Dataset:
    rows = [{"question": f"Name the colour {c}. Reply with the word {c} only.", "answer": c} for c in COLOURS]
    return Dataset.from_list(rows[:size])


def _colour_rubric(parser: vf.Parser) -> vf.Rubric:
    def says_the_colour(completion, answer, **kwargs) -> float:
        return 1.0 if answer in (parser.parse_answer(completion) or "").lower() else 0.0

    def reply_length(completion) -> float:
        return float(len(str(completion[-1].content or "")))

    rubric = vf.Rubric(parser=parser)
    rubric.add_reward_func(says_the_colour, weight=1.0)
    rubric.add_metric(reply_length)
    return rubric


def _single(size: int) -> vf.Environment:
    parser = vf.Parser()
    return vf.SingleTurnEnv(
        dataset=_colour_rows(size),
        eval_dataset=_colour_rows(2),
        system_prompt="Answer with one word.",
        parser=parser,
        rubric=_colour_rubric(parser),
    )


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first integer
        b: the second integer
    """
    return a + b


def _tool(size: int) -> vf.Environment:
    rows = [{"question": f"Use the add tool to add {a} and {b}.", "answer": str(a + b)} for a, b in _pairs(size)]

    def sum_in_answer(completion, answer, **kwargs) -> float:
        return 1.0 if answer in str(completion[-1].content or "") else 0.0

    rubric = vf.Rubric()
    rubric.add_reward_func(sum_in_answer, weight=1.0)
    return vf.ToolEnv(dataset=Dataset.from_list(rows), tools=[add], max_turns=3, rubric=rubric)


def _pairs(size: int) -> list[tuple[int, int]]:
    return [(12 + 7 * i, 30 + 11 * i) for i in range(size)]


class _Broken(vf.MultiTurnEnv):
    async def setup_state(self, state: vf.State) -> vf.State:
        raise ConnectionError("the environment's backend is down")

    async def env_response(self, messages, state, **kwargs):
        return []
