"""The pieces of the tool_use recipe: the calculator tool, the tool-result rewards and the tool-use metrics."""

import asyncio

import pytest

from agentrl.rewards.base import final_answer
from agentrl.tools.base import ToolCall
from agentrl.tools.builtin.calculator import calculator, evaluate, format_number
from agentrl.tools.registry import TOOLS
from agentrl.tools.toolset import ToolSet
from agentrl.trainer.loop import eval_metrics
from agentrl.trainer.metrics import tool_use_metrics
from agentrl.types import Message, Sample, Trajectory
from tests.unit.test_rewards_rules_more import score, traj


@pytest.mark.parametrize(
    ("expression", "value"),
    [("347 * 29", "10063"), ("(12 + 5) / 4", "4.25"), ("2 ** 10 - -3", "1027"), ("7 // 2 + 7 % 2", "4"),
     ("10 / 4 * 2", "5"), ("3 ^ 2", "9"), ("1 / 3", "0.3333333333")],
)  # fmt: skip
def test_calculator_is_exact(expression, value):
    assert calculator(expression) == value


@pytest.mark.parametrize(
    ("expression", "message"),
    [("__import__('os').system('x')", "only numbers"), ("1 / 0", "division by zero"), ("2 ** 1000", "exponents"),
     ("3 +", "cannot parse"), ("1" * 300, "longer than"), ("'a' * 3", "only numbers")],
)  # fmt: skip
def test_calculator_refuses_what_is_not_arithmetic(expression, message):
    with pytest.raises(ValueError, match=message):
        evaluate(expression)


def test_the_calculator_is_a_registered_tool_whose_errors_reach_the_model():
    tool = TOOLS.get("calculator")
    assert tool.name == "calculator" and "expression" in tool.parameters["properties"]
    tools = ToolSet([tool], trajectory_id="t")
    result = asyncio.run(tools.execute(ToolCall(id="call_0", name="calculator", arguments={"expression": "1 / 0"})))
    assert result.is_error and "division by zero" in result.content
    ok = asyncio.run(tools.execute(ToolCall(id="call_1", name="calculator", arguments={"expression": "347 * 29"})))
    assert not ok.is_error and ok.content == "10063"
    assert format_number(2.0) == "2" and format_number(10**20) == str(10**20)


def test_tool_result_credits_a_call_that_computed_the_answer():
    right = traj("no idea", tools=[("calculator", "10063")])
    assert score({"type": "tool_result"}, "", gt="10,063", t=right)[0] == 1.0
    assert score({"type": "tool_result", "tool": "search"}, "", gt="10063", t=right)[0] == 0.0
    wrong = traj("10063", tools=[("calculator", "9999")])
    assert score({"type": "tool_result"}, "", gt="10063", t=wrong)[0] == 0.0
    failed = traj("x", tools=[("calculator", "Error: 10063 is not an expression")])
    assert score({"type": "tool_result"}, "", gt="10063", t=failed)[0] == 0.0


def test_uses_tool_result_needs_the_result_in_the_final_answer():
    used = traj("347 * 29 = 10063.", tools=[("calculator", "10063")])
    assert score({"type": "uses_tool_result"}, "", t=used)[0] == 1.0
    ignored = traj("It is 10064.", tools=[("calculator", "10063")])
    assert score({"type": "uses_tool_result"}, "", t=ignored)[0] == 0.0
    partial = traj("It is 100630.", tools=[("calculator", "10063")])
    assert score({"type": "uses_tool_result"}, "", t=partial)[0] == 0.0
    assert score({"type": "uses_tool_result"}, "", t=traj("10063"))[0] == 0.0


def test_tool_use_metrics_count_calls_parses_and_errors():
    trajs = [
        Trajectory(metrics={"tool/calls": 2.0, "tool/errors": 1.0}),
        Trajectory(metrics={"tool/calls": 0.0, "tool/parse_errors": 2.0}),
        Trajectory(metrics={}),
        Trajectory(metrics={"tool/calls": 1.0}),
    ]
    assert tool_use_metrics(trajs, "eval") == {
        "eval/tool_call_rate": 0.5,
        "eval/tool_parse_rate": 3 / 5,
        "eval/tool_error_rate": 1 / 3,
    }
    assert tool_use_metrics([Trajectory(metrics={})], "eval") == {}


def test_eval_metrics_report_each_reward_component():
    a = Trajectory(reward=1.3, reward_components={"correct": 1.0, "right_call": 1.0}, metrics={"tool/calls": 1.0})
    b = Trajectory(reward=0.0, reward_components={"correct": 0.0, "right_call": 0.0}, metrics={"tool/calls": 0.0})
    metrics = eval_metrics([a, b])
    assert metrics["eval/reward/correct"] == 0.5 and metrics["eval/reward/right_call"] == 0.5
    assert metrics["eval/success_rate"] == 0.5 and metrics["eval/tool_call_rate"] == 0.5


def test_a_prompts_worked_examples_are_not_the_agents_own_tool_calls():
    example = [
        Message(role="user", content="What is 123 * 45?"),
        Message(role="assistant", content="<tool_call>calculator</tool_call>"),
        Message(role="tool", name="calculator", content="5535", tool_call_id="call_0"),
        Message(role="assistant", content="123 * 45 = 5535."),
        Message(role="user", content="What is 116 * 62?"),
    ]
    prompt = Sample(prompt=example, ground_truth="5535")
    no_call = Trajectory(messages=[Message(role="system", content="Use the tool."), *example,
                                   Message(role="assistant", content="It is 5535.")])  # fmt: skip
    assert score({"type": "tool_use", "tool": "calculator"}, "", t=no_call, s=prompt)[0] == 0.0
    assert score({"type": "tool_result"}, "", t=no_call, s=prompt)[0] == 0.0
    assert score({"type": "uses_tool_result"}, "", t=no_call, s=prompt)[0] == 0.0
    called = Trajectory(messages=[*no_call.messages[:-1], *traj("5535", tools=[("calculator", "5535")]).messages[1:]])
    assert score({"type": "tool_use", "tool": "calculator", "max_calls": 1}, "", t=called, s=prompt)[0] == 1.0
    assert score({"type": "tool_result"}, "", t=called, s=prompt)[0] == 1.0


def test_a_worked_examples_answer_is_not_the_agents_answer():
    example = [
        Message(role="user", content="What is 123 * 45?"),
        Message(role="assistant", content="123 * 45 = 5535."),
        Message(role="user", content="What is 116 * 62?"),
    ]
    silent = Trajectory(messages=list(example))  # the episode failed before the model replied
    assert final_answer(silent) == "123 * 45 = 5535."  # without the sample, the last assistant message
    assert final_answer(silent, Sample(prompt=example)) == ""
    assert score({"type": "contains"}, "", gt="5535", t=silent, s=Sample(prompt=example, ground_truth="5535"))[0] == 0
