"""The tool_pick recipe: its data (one lookup every episode writes alike, then a choice of the two keys it returned),
its `lookup` tool, and a reward that pays shaping only to an episode that ended with an answer."""

import asyncio
import json
import re
from pathlib import Path

import pytest

from agentrl.config import load_config
from agentrl.rewards.pipeline import RewardPipeline
from agentrl.tools.base import ToolCall
from agentrl.tools.registry import build_tools
from agentrl.tools.toolset import ToolSet
from agentrl.types import Message, Sample, Trajectory

RECIPES = Path(__file__).parents[2] / "recipes"
QUESTION = re.compile(r"Look up ([A-Z]{4})\. It gives two keys: look up the (first|second) one\.")
DRAWER = re.compile(r"two keys: ([0-9]{3}) \(the first\) and ([0-9]{3}) \(the second\)")


def _lookup(key: str) -> str:
    tools = ToolSet(build_tools(load_config("tool_pick").tools), trajectory_id="t")
    return asyncio.run(tools.execute(ToolCall(id="call_0", name="lookup", arguments={"key": key}))).content


def _rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (RECIPES / "tool_pick" / "data" / f"{name}.jsonl").open()]


def test_a_letter_key_holds_two_different_number_keys_and_a_number_key_a_number():
    for key in ("KQZV", "MTLA", "BQXR"):
        first, second = DRAWER.fullmatch(_lookup(key)).groups()
        assert first != second
        assert re.fullmatch(r"[1-9][0-9]{2}", _lookup(first))
    assert _lookup("kqzv ") == _lookup("KQZV")
    assert "is not a key" in _lookup("KQ")


def test_every_answer_is_the_number_under_the_key_the_question_picks():
    rows = {name: _rows(name) for name in ("train", "eval")}
    assert len(rows["eval"]) == 32 and len(rows["train"]) >= 128
    for name, some in rows.items():
        ordinals = {QUESTION.match(r["prompt"][-1]["content"])[2] for r in some}
        assert ordinals == {"first", "second"}, f"{name} asks for one position only"
        for row in some[:6]:
            key, which = QUESTION.match(row["prompt"][-1]["content"]).groups()
            picked = DRAWER.fullmatch(_lookup(key)).group(1 if which == "first" else 2)
            assert row["ground_truth"] == _lookup(picked)
    examples = {json.dumps(r["prompt"][:-1]) for name in rows for r in rows[name]}
    assert len(examples) == 1, "training and held-out prompts carry the same worked examples"
    keys = [{QUESTION.match(r["prompt"][-1]["content"])[1] for r in rows[name]} for name in rows]
    assert not keys[0] & keys[1], "held-out keys appear in training"


def _episode(*turns: str) -> Trajectory:
    """Assistant turns; a turn that calls lookup is followed by the tool's real result."""
    messages = [Message(role="user", content="q")]
    for turn in turns:
        messages.append(Message(role="assistant", content=turn))
        called = re.search(r'"key": "(\w+)"', turn)
        if called:
            messages.append(Message(role="tool", name="lookup", content=_lookup(called[1]), tool_call_id="c"))
    return Trajectory(messages=messages)


def _call(key: str) -> str:
    return f'<tool_call>\n{{"name": "lookup", "arguments": {{"key": "{key}"}}}}\n</tool_call>'


@pytest.mark.parametrize(
    ("case", "expected"),
    [("right", 1.3), ("right_key_wrong_number", 0.3), ("looks_up_to_max_turns", 0.0), ("other_key", 0.0)],
)
def test_shaping_is_paid_only_to_an_episode_that_answered(case, expected):
    first, second = DRAWER.fullmatch(_lookup("KQZV")).groups()
    answer, other = _lookup(second), _lookup(first)
    turns = {
        "right": [_call("KQZV"), _call(second), f"The answer is {answer}."],
        "right_key_wrong_number": [_call("KQZV"), _call(second), f"The answer is {second}."],
        "looks_up_to_max_turns": [_call("KQZV"), _call(second), _call(answer), _call(first)],
        "other_key": [_call("KQZV"), _call(first), f"The answer is {other}."],
    }[case]
    pipeline = RewardPipeline(load_config("tool_pick").reward)
    assert pipeline.score_batch([_episode(*turns)], [Sample(prompt=[], ground_truth=answer)]) == [
        pytest.approx(expected)
    ]
