"""`trainer.share_prompt_prefix`: the rows' common prompt prefix runs once, with the logprobs and gradients of
full rows."""

import pytest
import torch

from agentrl.config import TrainerConfig
from agentrl.trainer.batch import collate
from agentrl.trainer.engine import EngineConfig, PolicyEngine
from agentrl.trainer.forward import response_logprobs
from agentrl.trainer.shared_prefix import MIN_SHARED_TOKENS, common_prefix
from agentrl.trainer.step import policy_step
from agentrl.types import Segment, Trajectory
from tests.tiny_models import tiny_llama as tiny_model

SYSTEM = [(7 * i) % 50 + 3 for i in range(24)]  # a "system prompt" every row starts with


def row(state: list[int], turns: list[list[int]], reward: float, group: str = "g") -> Trajectory:
    """The shared prefix, a state of its own, then generated turns with an observation [2] between them."""
    segments = [Segment(token_ids=SYSTEM + state, trainable=False)]
    for i, turn in enumerate(turns):
        if i:
            segments.append(Segment(token_ids=[2], trainable=False, role="user"))
        segments.append(Segment(token_ids=turn, trainable=True, logprobs=[-1.0] * len(turn)))
    return Trajectory(segments=segments, group_id=group, reward=reward)


def rows_of_different_lengths() -> list[Trajectory]:
    return [
        row([9, 10, 11], [[40, 41]], 1.0),
        row([12], [[42], [43, 44, 45]], 0.0),  # a shorter prompt: more left padding
        row([13, 14, 15, 16, 17], [[46, 47, 48]], 0.5),
        row([18, 19], [[49]], 0.0),
    ]


def test_common_prefix_counts_the_shared_real_tokens_and_leaves_each_rows_last_prompt_token_out():
    batch = collate(rows_of_different_lengths(), 0)
    assert common_prefix(batch.input_ids, batch.attention_mask, batch.prompt_len) == len(SYSTEM)
    alone = collate([row([9], [[40]], 1.0)], 0)
    assert common_prefix(alone.input_ids, alone.attention_mask, alone.prompt_len) == 0  # one row: nothing to share
    differ = collate(
        [
            row([9], [[40]], 1.0),
            Trajectory(
                segments=[
                    Segment(token_ids=[1] * 30, trainable=False),
                    Segment(token_ids=[5], trainable=True, logprobs=[-1.0]),
                ],
                group_id="g",
                reward=0.0,
            ),
        ],
        0,
    )
    assert common_prefix(differ.input_ids, differ.attention_mask, differ.prompt_len) == 0
    # every row's prompt is the prefix itself: one token stays out, to predict the first response token
    same = collate([row([], [[40]], 1.0), row([], [[41, 42]], 0.0)], 0)
    assert common_prefix(same.input_ids, same.attention_mask, same.prompt_len) == len(SYSTEM) - 1


def test_shared_prefix_logprobs_equal_those_of_full_rows():
    assert len(SYSTEM) >= MIN_SHARED_TOKENS
    model, batch = tiny_model(), collate(rows_of_different_lengths(), 0)
    rows = slice(0, 4)
    with torch.no_grad():
        full = response_logprobs(model, batch, rows, torch.float32)
        shared = response_logprobs(model, batch, rows, torch.float32, share_prefix=True)
    assert torch.allclose(full, shared, atol=1e-5)
    padding = batch.attention_mask[:, batch.prompt_len :] == 0
    assert torch.all(shared[padding] == 0) and torch.any(shared != 0)


def test_shared_prefix_runs_fewer_tokens_and_one_training_step_gives_the_same_gradients():
    trajectories = rows_of_different_lengths()
    plain = PolicyEngine(tiny_model(), EngineConfig(lr=1e-3))
    shared = PolicyEngine(tiny_model(), EngineConfig(lr=1e-3, share_prompt_prefix=True))
    widths: list[int] = []
    shared.model.register_forward_pre_hook(
        lambda _, args, kwargs: widths.append(kwargs["input_ids"].numel()), with_kwargs=True
    )
    m_plain = policy_step(plain, TrainerConfig(), trajectories, 0)
    m_shared = policy_step(shared, TrainerConfig(), trajectories, 0)
    assert m_shared["train/loss"] == pytest.approx(m_plain["train/loss"], abs=1e-6)
    assert m_shared["train/grad_norm"] == pytest.approx(m_plain["train/grad_norm"], rel=1e-4)
    for (name, p), q in zip(plain.model.named_parameters(), shared.model.parameters(), strict=True):
        assert torch.allclose(p, q, atol=1e-6), name  # the same update
    batch = collate(trajectories, 0)
    assert widths[0] == len(SYSTEM) and sum(widths) < batch.input_ids.numel() - 2 * len(SYSTEM)


def test_gradient_checkpointing_turns_prefix_sharing_off():
    engine = PolicyEngine(tiny_model(), EngineConfig(share_prompt_prefix=True, gradient_checkpointing=True))
    assert not engine.share_prefix
    assert PolicyEngine(tiny_model(), EngineConfig(share_prompt_prefix=True)).share_prefix


def test_a_lora_policy_shares_the_prefix_with_the_same_logprobs():
    from agentrl.trainer.lora import apply_lora

    model = apply_lora(tiny_model(), 4, 8.0, ["q_proj", "v_proj"])
    batch = collate(rows_of_different_lengths(), 0)
    with torch.no_grad():
        full = response_logprobs(model, batch, slice(0, 4), torch.float32)
        shared = response_logprobs(model, batch, slice(0, 4), torch.float32, share_prefix=True)
    assert torch.allclose(full, shared, atol=1e-5)
