"""The tool_pick recipe: its data (one lookup every episode writes alike, then a choice of the two keys it returned),
its `lookup` tool, and a reward that pays shaping only to an episode that ended with an answer."""

import json
import re
from pathlib import Path

import pytest

from agentrl.config import load_config
from agentrl.rewards.pipeline import RewardPipeline
from agentrl.types import Sample
from tests.unit.lookup_helpers import call, episode, lookup

RECIPES = Path(__file__).parents[2] / "recipes"
QUESTION = re.compile(r"Look up ([A-Z]{4})\. It gives two keys: look up the (first|second) one\.")
DRAWER = re.compile(r"two keys: ([0-9]{3}) \(the first\) and ([0-9]{3}) \(the second\)")


def _rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (RECIPES / "tool_pick" / "data" / f"{name}.jsonl").open()]


def test_a_letter_key_holds_two_different_number_keys_and_a_number_key_a_number():
    for key in ("KQZV", "MTLA", "BQXR"):
        first, second = DRAWER.fullmatch(lookup("tool_pick", key)).groups()
        assert first != second
        assert re.fullmatch(r"[1-9][0-9]{2}", lookup("tool_pick", first))
    assert lookup("tool_pick", "kqzv ") == lookup("tool_pick", "KQZV")
    assert "is not a key" in lookup("tool_pick", "KQ")


def test_every_answer_is_the_number_under_the_key_the_question_picks():
    rows = {name: _rows(name) for name in ("train", "eval")}
    assert len(rows["eval"]) == 32 and len(rows["train"]) >= 128
    for name, some in rows.items():
        ordinals = {QUESTION.match(r["prompt"][-1]["content"])[2] for r in some}
        assert ordinals == {"first", "second"}, f"{name} asks for one position only"
        for row in some[:6]:
            key, which = QUESTION.match(row["prompt"][-1]["content"]).groups()
            picked = DRAWER.fullmatch(lookup("tool_pick", key)).group(1 if which == "first" else 2)
            assert row["ground_truth"] == lookup("tool_pick", picked)
    examples = {json.dumps(r["prompt"][:-1]) for name in rows for r in rows[name]}
    assert len(examples) == 1, "training and held-out prompts carry the same worked examples"
    keys = [{QUESTION.match(r["prompt"][-1]["content"])[1] for r in rows[name]} for name in rows]
    assert not keys[0] & keys[1], "held-out keys appear in training"


@pytest.mark.parametrize(
    ("case", "expected"),
    [("right", 1.3), ("right_key_wrong_number", 0.3), ("looks_up_to_max_turns", 0.0), ("other_key", 0.0)],
)
def test_shaping_is_paid_only_to_an_episode_that_answered(case, expected):
    first, second = DRAWER.fullmatch(lookup("tool_pick", "KQZV")).groups()
    answer, other = lookup("tool_pick", second), lookup("tool_pick", first)
    turns = {
        "right": [call("KQZV"), call(second), f"The answer is {answer}."],
        "right_key_wrong_number": [call("KQZV"), call(second), f"The answer is {second}."],
        "looks_up_to_max_turns": [call("KQZV"), call(second), call(answer), call(first)],
        "other_key": [call("KQZV"), call(first), f"The answer is {other}."],
    }[case]
    pipeline = RewardPipeline(load_config("tool_pick").reward)
    assert pipeline.score_batch([episode("tool_pick", *turns)], [Sample(prompt=[], ground_truth=answer)]) == [
        pytest.approx(expected)
    ]
