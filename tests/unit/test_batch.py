import pytest
import torch

from agentrl.trainer.batch import (
    UntrainableSegmentError,
    check_trainable,
    collate,
    response_length,
    trajectory_to_tensors,
)
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
    multi = traj(
        seg([1, 2], False),
        seg([3, 4], True, [-1.0, -1.0]),
        seg([5, 6, 7], False),
        seg([8], True, [-1.0]),
        seg([9], False),
    )
    assert response_length(multi) == len(trajectory_to_tensors(multi).response_ids) == 7
    assert response_length(traj(seg([1, 2], False))) == 0


def test_multiple_prompt_segments_join():
    t = trajectory_to_tensors(traj(seg([1], False), seg([2, 3], False), seg([4, 5], True, [-0.5, -0.25])))
    assert t.prompt_ids.tolist() == [1, 2, 3]
    assert t.rollout_logprobs.tolist() == [-0.5, -0.25]


def test_generated_tokens_without_logprobs_are_an_error_naming_the_backend():
    # filling them with 0.0 would read as probability 1 and quietly down-weight the tokens under TIS
    with pytest.raises(UntrainableSegmentError, match="without logprobs.*vllm"):
        trajectory_to_tensors(traj(seg([1], False), seg([4, 5], True)), backend="vllm")


def test_greedy_tokens_are_refused_for_training_and_sampled_ones_keep_their_temperature():
    greedy = traj(seg([1], False), Segment(token_ids=[4], trainable=True, logprobs=[-0.1], temperature=0.0))
    with pytest.raises(UntrainableSegmentError, match="greedy"):
        check_trainable(greedy, greedy.segments[1])
    assert trajectory_to_tensors(greedy).temperatures.tolist() == [1.0]  # scored (a mask check), never at 1/0
    warm = Segment(token_ids=[4, 5], trainable=True, logprobs=[-0.1, -0.2], temperature=0.7)
    t = trajectory_to_tensors(traj(seg([1], False), warm, seg([6], False), seg([7], True, [-0.3])))
    assert t.temperatures.tolist() == pytest.approx([0.7, 0.7, 1.0, 1.0])
    batch = collate([traj(seg([1], False), warm), traj(seg([1], False), seg([2], True, [-1.0]))], 0)
    assert batch.temperatures is not None
    assert torch.allclose(batch.temperatures, torch.tensor([[0.7, 0.7], [1.0, 1.0]]))
    assert collate([traj(seg([1], False), seg([2], True, [-1.0]))], 0).temperatures is None  # nothing to scale


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
