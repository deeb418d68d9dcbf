"""verifiers environments as a loop, with a scripted policy: the environment's own dataset, rollout, tools and
rubric; the rubric's reward equals the one verifiers computes itself on the same completion."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from agentrl.config.loader import load_config
from agentrl.config.schema import AgentConfig, DataConfig
from agentrl.loops.manager import RolloutManager
from agentrl.loops.testing import ScriptedPolicy
from agentrl.tools.parsers import get_parser
from agentrl.trainer.preflight import run_problems
from agentrl.types import StopReason

vf = pytest.importorskip("verifiers")
from verifiers.clients.client import Client  # noqa: E402
from verifiers.types import Response, ResponseMessage  # noqa: E402
from verifiers.types import ToolCall as VfToolCall  # noqa: E402

from agentrl.envs.verifiers import load_environment, split_samples  # noqa: E402
from agentrl.loops.verifiers import VerifiersLoop  # noqa: E402

ENV_FILE = str(Path(__file__).parents[1] / "verifiers_envs.py")


def agent(kind: str, **extra) -> AgentConfig:
    return AgentConfig(name="verifiers", kwargs={"env_id": ENV_FILE, "env_args": {"kind": kind}}, **extra)


def samples(kind: str, split: str = "train"):
    cfg = SimpleNamespace(agent=agent(kind), data=DataConfig(num_train_samples=8, num_eval_samples=4))
    return split_samples(cfg, split)


def play(tokenizer, kind: str, replies, sample_index: int = 0, **agent_options):
    manager = RolloutManager(ScriptedPolicy(tokenizer, replies), tokenizer, agent=agent(kind, **agent_options))
    sample = samples(kind)[sample_index]
    (traj,) = asyncio.run(manager.run([sample], n=1))
    return sample, traj


def test_the_environment_s_dataset_is_the_run_s_samples():
    train, held_out = samples("single"), samples("single", "eval")
    assert len(train) == 8 and len(held_out) == 2
    assert [m.role for m in train[1].prompt] == ["system", "user"] and train[1].ground_truth == "blue"
    assert train[1].extra_info["verifiers_input"]["answer"] == "blue" and train[1].data_source.startswith("verifiers/")


def test_a_single_turn_environment_s_rubric_is_the_reward(tokenizer):
    _, right = play(tokenizer, "single", ["blue"], sample_index=1)
    _, wrong = play(tokenizer, "single", ["red"], sample_index=1)
    assert right.reward == 1.0 and right.reward_components == {"says_the_colour": 1.0}
    assert wrong.reward == 0.0 and wrong.stop_reason == StopReason.DONE
    assert right.metrics["verifiers/reply_length"] == 4.0 and right.metrics["verifiers/num_turns"] == 1.0
    generated = [s for s in right.segments if s.trainable]
    assert len(generated) == 1 and tokenizer.decode(generated[0].token_ids).startswith("blue")


def test_a_tool_environment_runs_its_tool_and_scores_the_final_answer(tokenizer):
    call = '<tool_call>{"name": "add", "arguments": {"a": 12, "b": 30}}</tool_call>'
    sample, traj = play(tokenizer, "tool", [call, "The sum is 42."])
    assert sample.ground_truth == "42" and traj.reward == 1.0 and traj.num_turns == 2
    (tool,) = [m for m in traj.messages if m.role == "tool"]
    assert tool.content == "42"
    assert traj.metrics["verifiers/add_calls"] == 1.0 and traj.metrics["verifiers/total_tool_calls"] == 1.0
    assert "add" in traj.messages[0].content  # the tool is described to a template without a tools slot


def test_the_rubric_reward_equals_verifiers_own_on_the_same_completion(tokenizer):
    call = '<tool_call>{"name": "add", "arguments": {"a": 12, "b": 30}}</tool_call>'
    for replies in ([call, "The sum is 42."], [call, "I do not know."], ["No tool: 40."]):
        sample, traj = play(tokenizer, "tool", replies)
        replayed = replay_through_verifiers(sample, [m for m in traj.messages if m.role == "assistant"], replies)
        assert traj.reward == replayed["reward"]
        assert traj.reward_components["sum_in_answer"] == replayed["metrics"]["sum_in_answer"]


def test_an_environment_that_fails_in_setup_is_a_failed_trajectory(tokenizer):
    _, traj = play(tokenizer, "broken", ["blue"])
    assert traj.failed and traj.stop_reason == StopReason.ERROR
    assert "ConnectionError: the environment's backend is down" in traj.error


def test_the_turn_budget_ends_the_rollout_scored_with_its_stop_reason(tokenizer):
    call = '<tool_call>{"name": "add", "arguments": {"a": 12, "b": 30}}</tool_call>'
    _, traj = play(tokenizer, "tool", [call, call], max_turns=1)
    assert traj.stop_reason == StopReason.MAX_TURNS and not traj.failed and traj.num_turns == 1
    assert traj.reward == 0.0 and traj.reward_components == {"sum_in_answer": 0.0}


def test_bad_environments_are_refused_at_start():
    verifiers = ["agent.name=verifiers", "reward.components=[]"]  # the environment's rubric is the reward
    (missing,) = run_problems(load_config("quickstart", [*verifiers, "agent.kwargs.env_id=no-such-env"]))
    assert "verifiers cannot load 'no-such-env'" in missing and "installed verifiers environments:" in missing
    args = [f"agent.kwargs.env_id={ENV_FILE}", "agent.kwargs.env_args.kind=nope"]
    (bad_args,) = run_problems(load_config("quickstart", [*verifiers, *args]))
    assert "loading verifiers environment" in bad_args and "unknown kind 'nope'" in bad_args


class RenamedVerifiersLoop(VerifiersLoop):
    """The verifiers loop under another name (a dotted path): its reward is still the environment's rubric."""


@pytest.mark.parametrize("loop", ["verifiers", f"{__name__}:RenamedVerifiersLoop"])
def test_reward_components_that_would_replace_the_rubric_are_refused_at_start(loop):
    args = [f"agent.name={loop}", f"agent.kwargs.env_id={ENV_FILE}", "agent.kwargs.env_args.kind=single"]
    (problem,) = [p for p in run_problems(load_config("quickstart", args)) if "rubric" in p]  # quickstart's rewards
    assert problem.startswith(f"reward.components: agent.name={loop} is rewarded by the verifiers environment's rubric")
    assert "remove reward.components" in problem
    assert not run_problems(load_config("quickstart", [*args, "reward.components=[]"]))


class ReplayClient(Client):
    """verifiers' own client interface, answering with recorded assistant messages (no agentrl code)."""

    def __init__(self, replies: list[str], parse):
        super().__init__(None)
        self.replies, self.parse = list(replies), parse

    def setup_client(self, config):
        return None

    async def to_native_tool(self, tool):
        return tool

    async def to_native_prompt(self, messages):
        return messages, {}

    async def get_native_response(self, prompt, model, sampling_args, tools=None, **kwargs):
        content, calls = self.parse(self.replies.pop(0))
        message = ResponseMessage(
            content=content,
            tool_calls=calls or None,
            finish_reason="tool_calls" if calls else "stop",
            is_truncated=False,
        )
        return Response(id=uuid.uuid4().hex, created=int(time.time()), model=model, message=message)

    async def raise_from_native_response(self, response):
        return None

    async def from_native_response(self, response):
        return response

    async def close(self):
        return None


def replay_through_verifiers(sample, assistant_messages, replies) -> dict:
    """verifiers' own run_rollout (rollout, then rubric) of the environment on the same replies."""

    def parse(text: str):
        parsed = get_parser("hermes").parse(text)
        calls = [VfToolCall(id=c.id, name=c.name, arguments=json.dumps(c.arguments)) for c in parsed.calls]
        return (parsed.content if calls else text), calls

    env = load_environment(ENV_FILE, {"kind": "tool"})  # the same environment object: its rubric, its parser
    row = json.loads(json.dumps(sample.extra_info["verifiers_input"]))
    client = ReplayClient(replies[: len(assistant_messages)], parse)
    return asyncio.run(env.run_rollout(row, client, "replay", {}))
