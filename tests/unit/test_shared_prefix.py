"""`trainer.share_prompt_prefix`: the rows' common prompt prefix runs once, with the logprobs and gradients of
full rows."""

import pytest
import torch

from agentrl.config import TrainerConfig
from agentrl.shared_prefix import MIN_SHARED_TOKENS, common_prefix, distinct_prompts
from agentrl.trainer.batch import collate
from agentrl.trainer.engine import EngineConfig, PolicyEngine
from agentrl.trainer.forward import response_logprobs
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


def forward_widths(engine: PolicyEngine) -> list[int]:
    """The tokens of each forward call `engine`'s model makes from now on."""
    widths: list[int] = []
    engine.model.register_forward_pre_hook(
        lambda _, args, kwargs: widths.append(kwargs["input_ids"].numel()), with_kwargs=True
    )
    return widths


def assert_same_update(plain: PolicyEngine, other: PolicyEngine, trajectories: list[Trajectory]) -> None:
    """One `policy_step` each: the same loss, gradient norm and updated weights."""
    m_plain = policy_step(plain, TrainerConfig(), trajectories, 0)
    m_other = policy_step(other, TrainerConfig(), trajectories, 0)
    assert m_other["train/loss"] == pytest.approx(m_plain["train/loss"], abs=1e-6)
    assert m_other["train/grad_norm"] == pytest.approx(m_plain["train/grad_norm"], rel=1e-4)
    for (name, p), q in zip(plain.model.named_parameters(), other.model.parameters(), strict=True):
        # the same update; Adam's first step is lr * g / (|g| + 1e-8), so a gradient entry near 1e-8 moves by a
        # few 1e-6 with float rounding alone (one entry of 2048 did, on this machine's CPU)
        assert torch.allclose(p, q, atol=2e-5), name


def test_shared_prefix_runs_fewer_tokens_and_one_training_step_gives_the_same_gradients():
    trajectories = rows_of_different_lengths()
    plain = PolicyEngine(tiny_model(), EngineConfig(lr=1e-3))
    shared = PolicyEngine(tiny_model(), EngineConfig(lr=1e-3, share_prompt_prefix=True))
    widths = forward_widths(shared)
    assert_same_update(plain, shared, trajectories)
    batch = collate(trajectories, 0)
    assert widths[0] == len(SYSTEM) and sum(widths) < batch.input_ids.numel() - 2 * len(SYSTEM)


@pytest.mark.parametrize("repeats", [False, True], ids=["a common prefix", "repeated prompts"])
def test_with_gradient_checkpointing_the_shared_prefix_gives_the_same_gradients(repeats):
    trajectories = rows_that_repeat_prompts() if repeats else rows_of_different_lengths()
    plain = PolicyEngine(tiny_model(), EngineConfig(lr=1e-3))
    both = PolicyEngine(tiny_model(), EngineConfig(lr=1e-3, share_prompt_prefix=True, gradient_checkpointing=True))
    assert both.share_prefix
    widths, layer_runs = forward_widths(both), []
    both.model.model.layers[0].self_attn.register_forward_pre_hook(lambda *_: layer_runs.append(1))
    assert_same_update(plain, both, trajectories)
    assert widths[0] <= len(SYSTEM)  # the prefix ran on its own
    # every forward of the training step ran the layer twice (once more in backward): checkpointing was on
    assert len(layer_runs) > len(widths)


def test_sharing_is_refused_with_the_reason_for_a_model_with_sliding_window_layers(caplog):
    model = tiny_model()
    model.config.layer_types = ["sliding_attention"] * model.config.num_hidden_layers
    engine = PolicyEngine(model, EngineConfig(share_prompt_prefix=True))
    assert not engine.share_prefix and "sliding_attention" in caplog.text
    assert PolicyEngine(tiny_model(), EngineConfig(share_prompt_prefix=True)).share_prefix


def test_a_lora_policy_shares_the_prefix_with_the_same_logprobs():
    from agentrl.trainer.lora import apply_lora

    model = apply_lora(tiny_model(), 4, 8.0, ["q_proj", "v_proj"])
    batch = collate(rows_of_different_lengths(), 0)
    with torch.no_grad():
        full = response_logprobs(model, batch, slice(0, 4), torch.float32)
        shared = response_logprobs(model, batch, slice(0, 4), torch.float32, share_prefix=True)
    assert torch.allclose(full, shared, atol=1e-5)


def rows_that_repeat_prompts(system: list[int] = SYSTEM) -> list[Trajectory]:
    """Samples of three states (GRPO's n per prompt, gym turns from one state), replies of different lengths."""

    def sample(state: list[int], turns: list[list[int]], reward: float) -> Trajectory:
        traj = row(state, turns, reward)
        traj.segments[0] = Segment(token_ids=system + state, trainable=False)
        return traj

    return [
        sample([9, 10, 11], [[40, 41]], 1.0),
        sample([12], [[46], [47, 48]], 0.0),
        sample([9, 10, 11], [[42]], 0.0),
        sample([13, 14], [[50]], 0.5),
        sample([9, 10, 11], [[43, 44, 45]], 0.5),
        sample([12], [[49]], 1.0),
    ]


def test_distinct_prompts_groups_the_rows_that_repeat_a_prompt():
    batch = collate(rows_that_repeat_prompts(), 0)
    firsts, row_prompt = distinct_prompts(batch.input_ids, batch.attention_mask, batch.prompt_len)
    assert sorted(firsts.tolist()) == [0, 1, 3]
    assert [firsts[i].item() for i in row_prompt.tolist()] == [0, 1, 0, 3, 0, 1]
    assert (
        distinct_prompts(
            *(lambda b: (b.input_ids, b.attention_mask, b.prompt_len))(collate(rows_of_different_lengths(), 0))
        )
        is None
    )


@pytest.mark.parametrize("system", [SYSTEM, [5, 6]], ids=["with a common system prompt", "short prompts"])
def test_repeated_prompts_run_once_with_the_logprobs_and_gradients_of_full_rows(system):
    trajectories = rows_that_repeat_prompts(system)
    batch = collate(trajectories, 0)
    with torch.no_grad():
        full = response_logprobs(tiny_model(), batch, slice(0, 6), torch.float32)
        shared = response_logprobs(tiny_model(), batch, slice(0, 6), torch.float32, share_prefix=True)
    assert torch.allclose(full, shared, atol=1e-5)
    plain = PolicyEngine(tiny_model(), EngineConfig(lr=1e-3))
    sharing = PolicyEngine(tiny_model(), EngineConfig(lr=1e-3, share_prompt_prefix=True))
    ran: dict[str, int] = {"plain": 0, "sharing": 0}
    for name, engine in (("plain", plain), ("sharing", sharing)):
        engine.model.register_forward_pre_hook(
            lambda _, args, kwargs, name=name: ran.__setitem__(name, ran[name] + kwargs["input_ids"].numel()),
            with_kwargs=True,
        )
    m_plain = policy_step(plain, TrainerConfig(), trajectories, 0)
    m_shared = policy_step(sharing, TrainerConfig(), trajectories, 0)
    assert m_shared["train/loss"] == pytest.approx(m_plain["train/loss"], abs=1e-6)
    assert m_shared["train/grad_norm"] == pytest.approx(m_plain["train/grad_norm"], rel=1e-4)
    for (name, p), q in zip(plain.model.named_parameters(), sharing.model.parameters(), strict=True):
        assert torch.allclose(p, q, atol=1e-6), name
    # the repeated prompts (and the system prompt of the distinct ones) ran once
    assert ran["sharing"] < ran["plain"] * (0.5 if system == SYSTEM else 0.9)
