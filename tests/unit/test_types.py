import pytest
from pydantic import ValidationError

from agentrl.types import Message, Sample, Segment, StopReason, Trajectory


def make_trajectory() -> Trajectory:
    traj = Trajectory(group_id="g1", agent_name="tool_agent")
    traj.append(Segment(token_ids=[1, 2, 3], trainable=False, role="user"))
    traj.append(Segment(token_ids=[4, 5], trainable=True, logprobs=[-0.1, -0.2], policy_version=3))
    traj.append(Segment(token_ids=[6], trainable=False, role="tool"))
    traj.append(Segment(token_ids=[7, 8], trainable=True, logprobs=[-0.3, -0.4], policy_version=3))
    traj.messages = [
        Message(role="user", content="hi"),
        Message(role="assistant", content="", tool_calls=[{"id": "c1", "type": "function"}]),
        Message(role="tool", content="out", tool_call_id="c1"),
    ]
    traj.reward = 0.5
    traj.reward_components = {"exact": 1.0, "judge": 0.0}
    traj.stop_reason = StopReason.MAX_TURNS
    traj.num_turns = 2
    traj.timings = {"generate": 1.5}
    traj.metadata = {"task": "x"}
    return traj


def test_trajectory_json_round_trip():
    traj = make_trajectory()
    back = Trajectory.from_json(traj.to_json())
    assert back == traj
    assert back.stop_reason is StopReason.MAX_TURNS
    assert back.segments[1].logprobs == [-0.1, -0.2]


def test_token_views():
    traj = make_trajectory()
    assert traj.token_ids == [1, 2, 3, 4, 5, 6, 7, 8]
    assert traj.num_tokens == 8 and traj.num_generated_tokens == 4


def test_segment_logprob_count_must_match():
    with pytest.raises(ValidationError, match="one logprob per token"):
        Segment(token_ids=[1, 2], trainable=True, logprobs=[-1.0])


def test_sample_round_trip_and_unknown_field():
    sample = Sample(prompt=[Message(role="user", content="2+2?")], ground_truth="4", agent_name="single_turn")
    assert Sample.from_json(sample.to_json()) == sample
    with pytest.raises(ValidationError):
        Sample(prompt=[], bogus=1)


def test_message_to_openai_drops_unset_fields():
    assert Message(role="user", content="x").to_openai() == {"role": "user", "content": "x"}


def test_stop_reason_values_are_stable_strings():
    assert StopReason("context_overflow") is StopReason.CONTEXT_OVERFLOW
    assert {r.value for r in StopReason} >= {
        "done",
        "max_turns",
        "max_tokens",
        "context_overflow",
        "tool_error_limit",
        "sandbox_error",
        "aborted",
    }


def test_infinite_logprobs_and_nan_rewards_survive_json():
    import math

    traj = Trajectory(reward=float("nan"), segments=[Segment(token_ids=[5], trainable=True, logprobs=[float("-inf")])])
    back = Trajectory.from_json(traj.to_json())
    assert back.segments[0].logprobs == [float("-inf")] and math.isnan(back.reward)
