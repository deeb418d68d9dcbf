"""A one-question verifiers environment that `check_loop` plays the verifiers loop with (`VerifiersLoop.check_case`),
written in verifiers' own API: say a word, scored by a rubric. Loaded by path, as any `env.py` is."""

from __future__ import annotations

from typing import Any

WORD = "river"


def load_environment() -> Any:
    import verifiers as vf
    from datasets import Dataset

    parser = vf.Parser()

    def says_the_word(completion: Any, answer: str, **kwargs: Any) -> float:
        return 1.0 if answer in (parser.parse_answer(completion) or "").lower() else 0.0

    rubric = vf.Rubric(parser=parser)
    rubric.add_reward_func(says_the_word, weight=1.0)
    rows = Dataset.from_list([{"question": f"Say the word {WORD}.", "answer": WORD}])
    return vf.SingleTurnEnv(dataset=rows, parser=parser, rubric=rubric)
