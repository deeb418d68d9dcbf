"""The tool_choice recipe: its data (a choice of key, then two dependent lookups), the tool it shares with
tool_chain, and a reward that pays shaping only to an episode that ended with an answer."""

import json
import re
from pathlib import Path

import pytest

from agentrl.config import load_config
from agentrl.rewards.pipeline import RewardPipeline
from agentrl.types import Sample
from tests.unit.lookup_helpers import call, episode, lookup

RECIPES = Path(__file__).parents[2] / "recipes"
QUESTION = re.compile(r"Keys: ([A-Z]{4}), ([A-Z]{4})\. Look up the (first|second) key")


def _rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (RECIPES / "tool_choice" / "data" / f"{name}.jsonl").open()]


def test_the_recipe_uses_the_tool_chain_lookup_tool():
    cfg = load_config("tool_choice")
    assert Path(cfg.tools[0].class_.rpartition(":")[0]).resolve() == RECIPES / "tool_chain" / "tools.py"


def test_every_answer_is_two_lookups_from_the_key_the_question_chooses():
    rows = {name: _rows(name) for name in ("train", "eval")}
    assert len(rows["eval"]) == 32 and len(rows["train"]) >= 128
    for name, some in rows.items():
        asked = QUESTION.match(some[0]["prompt"][-1]["content"])
        assert asked, some[0]["prompt"][-1]
        ordinals = {QUESTION.match(r["prompt"][-1]["content"])[3] for r in some}
        assert ordinals == {"first", "second"}, f"{name} asks for one position only"
        for row in some[:6]:
            first_key, second_key, which = QUESTION.match(row["prompt"][-1]["content"]).groups()
            key = first_key if which == "first" else second_key
            assert row["ground_truth"] == lookup("tool_choice", lookup("tool_choice", key).split()[0])
    examples = {json.dumps(r["prompt"][:-1]) for name in rows for r in rows[name]}
    assert len(examples) == 1, "training and held-out prompts carry the same worked examples"
    pairs = [{QUESTION.match(r["prompt"][-1]["content"]).group(1, 2) for r in rows[name]} for name in rows]
    held_out_keys = {key for pair in pairs[1] for key in pair}
    assert not held_out_keys & {key for pair in pairs[0] for key in pair}


@pytest.mark.parametrize(
    ("case", "expected"),
    [("right", 1.3), ("right_chain_wrong_number", 0.3), ("chain_to_max_turns", 0.0), ("wrong_key", 0.0)],
)
def test_shaping_is_paid_only_to_an_episode_that_answered(case, expected):
    first = lookup("tool_choice", "KQZV").split()[0]
    answer = lookup("tool_choice", first)
    other = lookup("tool_choice", lookup("tool_choice", "MTLA").split()[0])
    turns = {
        "right": [call("KQZV"), call(first), f"The answer is {answer}."],
        "right_chain_wrong_number": [call("KQZV"), call(first), f"The answer is {first}."],
        "chain_to_max_turns": [call("KQZV"), call(first), call(answer), call(lookup("tool_choice", answer))],
        "wrong_key": [call("MTLA"), call(lookup("tool_choice", "MTLA").split()[0]), f"The answer is {other}."],
    }[case]
    pipeline = RewardPipeline(load_config("tool_choice").reward)
    assert pipeline.score_batch([episode("tool_choice", *turns)], [Sample(prompt=[], ground_truth=answer)]) == [
        pytest.approx(expected)
    ]
