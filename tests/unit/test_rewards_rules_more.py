"""Rule rewards beyond string matching, custom components by path, and verl-style compute_score functions."""

import pytest

from agentrl.config import RewardConfig
from agentrl.errors import AgentRLError
from agentrl.rewards.base import RewardComponent, RewardInput, RewardResult
from agentrl.rewards.equivalence import extract_number, parse_number
from agentrl.rewards.pipeline import RewardPipeline
from agentrl.rewards.registry import register_reward
from agentrl.sandbox.local import LocalSandbox
from agentrl.types import Message, Sample, Trajectory


def traj(answer, tools=(), metrics=None):
    messages = [Message(role="user", content="q")]
    for name, content in tools:
        messages.append(Message(role="assistant", content=f"<tool_call>{name}</tool_call>"))
        messages.append(Message(role="tool", name=name, content=content, tool_call_id="c"))
    messages.append(Message(role="assistant", content=answer))
    return Trajectory(messages=messages, metrics=metrics or {})


def sample(gt=None, **kw):
    return Sample(prompt=[Message(role="user", content="q")], ground_truth=gt, **kw)


def score(component, answer, gt=None, sandbox=None, t=None, s=None):
    pipe = RewardPipeline(RewardConfig(components=[{"name": "r", **component}]))
    t = t or traj(answer)
    pipe.score(t, s or sample(gt), sandbox)
    return t.reward_components.get("r"), t.reward_details["r"]


@pytest.mark.parametrize(
    ("answer", "gt", "expected"),
    [
        ("The answer is $\\frac{1}{2}$", "0.5", 1.0),
        ("so the result is \\boxed{\\frac{2}{4}}", "\\frac{1}{2}", 1.0),
        ("\\boxed{x^2+2x+1}", "(x+1)^2", 1.0),
        ("\\boxed{3}", "4", 0.0),
        ("I do not know", "4", 0.0),
        ("\\boxed{\\{1,2\\}}", "\\{2,1\\}", 1.0),
    ],
)
def test_math_equivalence(answer, gt, expected):
    value, details = score({"type": "math"}, answer, gt)
    assert value == expected, details


@pytest.mark.parametrize(
    ("text", "value"),
    [("1,234.5", 1234.5), ("$3", 3.0), ("1/2", 0.5), ("50%", 50.0), ("-7", -7.0), ("x", None), ("1/0", None)],
)
def test_parse_number(text, value):
    assert parse_number(text) == value


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("first 3 apples, then 5, total 8", 8.0),
        ("#### 1,000\nbye 7", 1000.0),
        ("The answer is 42. Step 9 was hard", 42.0),
        ("\\boxed{12} (checked with 13)", 12.0),
        ("no numbers", None),
        ("version 2.5.", 2.5),
    ],
)
def test_extract_number(text, value):
    assert extract_number(text) == value


@pytest.mark.parametrize(
    ("answer", "gt", "expected"), [("so 18 eggs", 18, 1.0), ("18.0000001", "18", 1.0), ("17", "18", 0.0), ("x", 1, 0.0)]
)
def test_numeric(answer, gt, expected):
    assert score({"type": "numeric"}, answer, gt)[0] == expected


def test_numeric_tolerance_and_bad_ground_truth():
    assert score({"type": "numeric", "rel_tol": 0.1}, "19", 18)[0] == 1.0
    value, details = score({"type": "numeric"}, "19", "unknown")
    assert value == 0.0 and "not a number" in details["error"]


@pytest.mark.parametrize(
    ("options", "answer", "expected"),
    [
        ({"preset": "boxed"}, "so \\boxed{4}", 1.0),
        ({"preset": "boxed"}, "4", 0.0),
        ({"preset": "think"}, "<think>hmm</think> 4", 1.0),
        ({"preset": "think"}, "4 <think>hmm</think>", 0.0),
        ({"preset": "answer_tag"}, "reasoning <answer>4</answer>", 1.0),
        ({"pattern": r"[A-D]"}, "B", 1.0),
        ({"pattern": r"[A-D]"}, "B because", 0.0),
        ({"json_keys": ["answer"]}, '{"answer": 4}', 1.0),
        ({"json_keys": ["answer"]}, '{"other": 4}', 0.0),
        ({"json_keys": []}, "[1]", 0.0),
        ({"max_chars": 3}, "four", 0.0),
        ({"preset": "boxed", "max_chars": 100}, "\\boxed{4}", 1.0),
    ],
)
def test_format(options, answer, expected):
    value, details = score({"type": "format", **options}, answer)
    assert value == expected, details
    assert bool(details["failed"]) == (expected == 0.0)


def test_format_unknown_preset_is_a_failure_not_a_crash():
    value, details = score({"type": "format", "preset": "nope"}, "x")
    assert value == 0.0 and "unknown format preset" in details["error"]


def test_tool_use():
    t = traj("done", tools=[("search", "result"), ("search", "Error: timed out"), ("calc", "4")])
    assert score({"type": "tool_use", "tool": "search"}, "", t=t)[0] == 1.0
    assert score({"type": "tool_use", "tool": "search", "min_calls": 3}, "", t=t)[0] == 0.0
    assert score({"type": "tool_use", "tool": "browser"}, "", t=t)[0] == 0.0
    assert score({"type": "tool_use", "max_calls": 2}, "", t=t)[0] == 0.0
    value, details = score({"type": "tool_use", "max_errors": 0}, "", t=t)
    assert value == 0.0 and details["errors"] == 1 and details["calls"] == {"search": 2, "calc": 1}
    assert score({"type": "tool_use", "min_calls": 0}, "", t=traj("x"))[0] == 1.0


def test_tool_use_counts_the_submission_that_ended_the_episode():
    t = traj("", tools=[("bash", "ran")])
    assert score({"type": "tool_use", "tool": "submit"}, "", t=t)[0] == 0.0
    t.metadata["final_tool_calls"] = ["submit"]  # its result never became a message
    value, details = score({"type": "tool_use", "tool": "submit"}, "", t=t)
    assert value == 1.0 and details["calls"] == {"bash": 1, "submit": 1}


def test_tool_use_prefers_the_toolset_error_metric():
    t = traj("done", tools=[("search", "Error: but not counted")], metrics={"tool/errors": 0.0})
    assert score({"type": "tool_use", "max_errors": 0}, "", t=t)[0] == 1.0


async def test_command_passes_in_a_local_sandbox():
    pipe = RewardPipeline(
        RewardConfig(
            components=[
                {
                    "name": "ok",
                    "type": "command",
                    "command": 'test "$(cat answer.txt)" = 42',
                    "answer_file": "answer.txt",
                },
                {"name": "tests", "type": "command"},
            ]
        )
    )
    async with LocalSandbox() as box:
        await box.write_file("test.sh", "echo running; exit 3")
        t = traj("42")
        await pipe.ascore(t, sample(reward_spec={"command": "bash test.sh"}), box)
        assert t.reward_components == {"ok": 1.0, "tests": 0.0}
        assert t.reward_details["tests"]["exit_code"] == 3 and "running" in t.reward_details["tests"]["stdout"]
        t = traj("41")
        await pipe.ascore(t, sample(reward_spec={"command": "true"}), box)
        assert t.reward_components == {"ok": 0.0, "tests": 1.0}


async def test_command_timeout_scores_zero_and_missing_sandbox_fails():
    async with LocalSandbox() as box:
        t = traj("x")
        pipe = RewardPipeline(
            RewardConfig(components=[{"name": "c", "type": "command", "command": "sleep 5", "timeout": 0.2}])
        )
        assert await pipe.ascore(t, sample(), box) == 0.0
        assert t.reward_details["c"]["timed_out"] is True
    value, details = score({"type": "command", "command": "true"}, "x")
    assert value == 0.0 and "no sandbox" in details["error"]


# ---- custom components -------------------------------------------------------------------------------------


def compute_score(data_source, solution_str, ground_truth, extra_info=None, bonus=0.0):
    """verl-style."""
    assert extra_info["num_turns"] == 0 and extra_info["split"] == "test"
    return float(solution_str.strip() == ground_truth) + bonus


async def async_compute_score(data_source, solution_str, ground_truth, extra_info):
    return {"score": 0.25, "source": data_source}


def length_reward(inp: RewardInput, target: int = 3) -> RewardResult:
    return RewardResult(float(len(inp.answer) == target), {"len": len(inp.answer)})


NOT_A_REWARD = 3


class Constant(RewardComponent):
    def __init__(self, value: float):
        self.value = value

    async def ascore(self, inp):
        return RewardResult(self.value)


def test_verl_compute_score_by_function_and_by_component():
    s = sample("yes", extra_info={"split": "test"})
    t = traj(" yes ")
    cfg = RewardConfig(function=f"{__name__}:compute_score")
    assert RewardPipeline(cfg).score(t, s) == 1.0
    assert t.reward_components == {"compute_score": 1.0}
    comp = {"name": "v", "type": "compute_score", "function": f"{__name__}.compute_score", "bonus": 0.5}
    assert RewardPipeline(RewardConfig(components=[comp])).score(traj("yes"), s) == 1.5
    t = traj("x")
    RewardPipeline(RewardConfig(components=[{"name": "a", "type": f"{__name__}:async_compute_score"}])).score(
        t, sample("y", data_source="gsm8k")
    )
    assert t.reward_components == {"a": 0.25} and t.reward_details["a"]["source"] == "gsm8k"


def test_custom_function_class_file_and_registered(tmp_path):
    path = tmp_path / "my_reward.py"
    path.write_text("def compute_score(data_source, solution_str, ground_truth, extra_info):\n    return 0.75\n")
    register_reward("constant_test")(Constant)
    comps = [
        {"name": "len", "type": f"{__name__}.length_reward", "target": 2},
        {"name": "cls", "type": f"{__name__}:Constant", "value": 0.5},
        {"name": "file", "type": f"{path}:compute_score"},
        {"name": "reg", "type": "constant_test", "value": 0.125},
    ]
    t = traj("ab")
    RewardPipeline(RewardConfig(components=comps)).score(t, sample())
    assert t.reward_components == {"len": 1.0, "cls": 0.5, "file": 0.75, "reg": 0.125}


@pytest.mark.parametrize(
    ("component", "message"),
    [
        ({"type": "no.such.module:fn"}, "cannot import .no.such.module"),
        ({"type": f"{__name__}:length_reward", "nope": 1}, "do not fit length_reward"),
        ({"type": "regex"}, "do not fit regex_match"),
        ({"type": f"{__name__}:Constant"}, "bad options"),
        ({"type": "compute_score"}, "needs `function"),
        ({"type": f"{__name__}:NOT_A_REWARD"}, "is 3, not a RewardComponent"),
    ],
)
def test_bad_custom_components_fail_at_build_time(component, message):
    with pytest.raises(AgentRLError, match=message):
        RewardPipeline(RewardConfig(components=[component]))
