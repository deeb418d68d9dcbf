import pytest
import torch

from agentrl.trainer.batch import collate, response_length, trajectory_to_tensors
from agentrl.types import Segment, Trajectory


def traj(*segments: Segment) -> Trajectory:
    return Trajectory(segments=list(segments))


def seg(ids, trainable, lp=None):
    return Segment(token_ids=ids, trainable=trainable, logprobs=lp)


def test_single_turn():
    t = trajectory_to_tensors(traj(seg([1, 2, 3], False), seg([4, 5], True, [-0.5, -1.5])))
    assert t.prompt_ids.tolist() == [1, 2, 3]
    assert t.response_ids.tolist() == [4, 5]
    assert t.response_mask.tolist() == [1, 1]
    assert t.rollout_logprobs.tolist() == [-0.5, -1.5]


def test_non_trainable_segments_between_trainable_ones_are_masked():
    t = trajectory_to_tensors(
        traj(
            seg([1, 2], False),
            seg([3, 4], True, [-0.1, -0.2]),
            seg([5, 6, 7], False),  # tool output
            seg([8], True, [-0.3]),
            seg([9], False),  # user turn
            seg([10, 11], True, [-0.4, -0.5]),
        )
    )
    assert t.prompt_ids.tolist() == [1, 2]
    assert t.response_ids.tolist() == [3, 4, 5, 6, 7, 8, 9, 10, 11]
    assert t.response_mask.tolist() == [1, 1, 0, 0, 0, 1, 0, 1, 1]
    assert t.rollout_logprobs.tolist() == pytest.approx([-0.1, -0.2, 0, 0, 0, -0.3, 0, -0.4, -0.5])


def test_response_length_matches_the_response_tensor():
    multi = traj(seg([1, 2], False), seg([3, 4], True), seg([5, 6, 7], False), seg([8], True), seg([9], False))
    assert response_length(multi) == len(trajectory_to_tensors(multi).response_ids) == 7
    assert response_length(traj(seg([1, 2], False))) == 0


def test_multiple_prompt_segments_join_and_missing_logprobs_are_zero():
    t = trajectory_to_tensors(traj(seg([1], False), seg([2, 3], False), seg([4, 5], True)))
    assert t.prompt_ids.tolist() == [1, 2, 3]
    assert t.rollout_logprobs.tolist() == [0.0, 0.0]


def test_no_trainable_segment_is_an_error():
    with pytest.raises(ValueError, match="no trainable segment"):
        trajectory_to_tensors(traj(seg([1, 2], False)))


def test_collate_pads_prompts_left_and_responses_right():
    a = traj(seg([1, 2, 3], False), seg([4], True, [-1.0]))
    b = traj(seg([7], False), seg([8, 9], True, [-2.0, -3.0]), seg([10], False), seg([11], True, [-4.0]))
    batch = collate([a, b], pad_token_id=0)
    assert batch.prompt_len == 3
    assert batch.input_ids.tolist() == [[1, 2, 3, 4, 0, 0, 0], [0, 0, 7, 8, 9, 10, 11]]
    assert batch.attention_mask.tolist() == [[1, 1, 1, 1, 0, 0, 0], [0, 0, 1, 1, 1, 1, 1]]
    assert batch.position_ids[1, 2:].tolist() == [0, 1, 2, 3, 4]
    assert batch.position_ids[0, :4].tolist() == [0, 1, 2, 3]
    assert batch.response_mask.tolist() == [[1, 0, 0, 0], [1, 1, 0, 1]]
    assert torch.equal(batch.rollout_logprobs[1], torch.tensor([-2.0, -3.0, 0.0, -4.0]))
