import copy

import pytest
import torch

from agentrl.config import TrainerConfig
from agentrl.trainer.batch import collate
from agentrl.trainer.engine import EngineConfig, PolicyEngine
from agentrl.trainer.step import policy_step
from agentrl.types import Segment, Trajectory
from tests.tiny_models import tiny_llama as tiny_model


def traj(prompt, response, group="g", reward=0.0, tool=None):
    segs = [
        Segment(token_ids=prompt, trainable=False),
        Segment(token_ids=response, trainable=True, logprobs=[-1.0] * len(response)),
    ]
    if tool:
        segs += [
            Segment(token_ids=tool, trainable=False, role="tool"),
            Segment(token_ids=[5, 6], trainable=True, logprobs=[-1.0, -1.0]),
        ]
    return Trajectory(segments=segs, group_id=group, reward=reward)


def batch_of():
    return collate(
        [
            traj([1, 2, 3], [4, 5, 6], reward=1.0),
            traj([7], [8, 9], reward=0.0, tool=[10, 11]),
            traj([3, 3], [2], reward=0.5),
        ],
        pad_token_id=0,
    )


def test_logprobs_match_an_unpadded_forward_pass():
    model = tiny_model()
    engine = PolicyEngine(model)
    batch = batch_of()
    logp = engine.logprobs(batch)
    # second row alone, without padding: prompt [7], response [8, 9, 10, 11, 5, 6]
    ids = torch.tensor([[7, 8, 9, 10, 11, 5, 6]])
    with torch.no_grad():
        ref = torch.log_softmax(model(input_ids=ids).logits[0, :-1], -1).gather(-1, ids[0, 1:, None]).squeeze(-1)
    assert torch.allclose(logp[1, :6], ref, atol=1e-5)
    assert torch.all(logp[2, 1:] == 0)  # padding


def test_logprobs_are_of_each_segment_s_sampling_temperature():
    model = tiny_model()
    tempered = [
        Segment(token_ids=[7], trainable=False),
        Segment(token_ids=[8, 9], trainable=True, logprobs=[-1.0] * 2, temperature=0.7),
        Segment(token_ids=[10], trainable=False, role="tool"),
        Segment(token_ids=[5, 6], trainable=True, logprobs=[-1.0] * 2, temperature=1.3),
    ]
    batch = collate([Trajectory(segments=tempered), traj([3, 3], [2])], pad_token_id=0)
    logp = PolicyEngine(model).logprobs(batch)
    ids = torch.tensor([[7, 8, 9, 10, 5, 6]])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, :-1]
    temps = torch.tensor([0.7, 0.7, 1.0, 1.3, 1.3])[:, None]
    ref = torch.log_softmax(logits / temps, -1).gather(-1, ids[0, 1:, None]).squeeze(-1)
    assert torch.allclose(logp[0, :5], ref, atol=1e-5)
    untempered = torch.log_softmax(logits, -1).gather(-1, ids[0, 1:, None]).squeeze(-1)
    assert not torch.allclose(logp[0, :2], untempered[:2], atol=1e-3)
    assert torch.allclose(logp[1, :1], PolicyEngine(model).logprobs(collate([traj([3, 3], [2])], 0))[0], atol=1e-6)


def test_micro_batches_of_short_rows_run_without_the_batch_padding_and_give_the_same_logprobs():
    model = tiny_model()
    batch = collate([traj([3, 3], [2]), traj([1, 2, 3], [4]), traj([7], [8, 9, 10, 11, 12, 13, 14, 15])], 0)
    whole = PolicyEngine(model, EngineConfig(micro_batch_tokens=10_000))
    small = PolicyEngine(model, EngineConfig(micro_batch_tokens=8))
    assert [(s.start, s.stop) for s, _ in small.micro_batches(batch)] == [(0, 2), (2, 3)]  # 2 rows x 4 tokens
    widths = []
    hook = model.register_forward_pre_hook(
        lambda _, args, kwargs: widths.append(kwargs["input_ids"].shape[1]), with_kwargs=True
    )
    try:
        logp = small.logprobs(batch)
    finally:
        hook.remove()
    assert widths == [4, 9]  # the first two rows: 3 prompt columns + 1 response column, not the batch's 3 + 8
    assert torch.allclose(logp, whole.logprobs(batch), atol=1e-6)
    assert logp.shape == batch.response_mask.shape


def test_micro_batching_gives_the_same_step():
    base = tiny_model()
    big = PolicyEngine(copy.deepcopy(base), EngineConfig(lr=1e-2, micro_batch_tokens=10_000))
    small = PolicyEngine(copy.deepcopy(base), EngineConfig(lr=1e-2, micro_batch_tokens=8))
    trajs = [
        traj([1, 2, 3], [4, 5, 6], "a", 1.0),
        traj([1, 2, 3], [6, 5, 4], "a", 0.0),
        traj([7], [8, 9], "b", 1.0),
        traj([7], [9, 8], "b", 0.0),
    ]
    m_big = policy_step(big, TrainerConfig(), trajs, 0)
    m_small = policy_step(small, TrainerConfig(), trajs, 0)
    for p, q in zip(big.model.parameters(), small.model.parameters(), strict=True):
        assert torch.allclose(p.grad, q.grad, atol=1e-6)  # gradients of the step are kept until the next one
    assert m_big["train/loss"] == pytest.approx(m_small["train/loss"], abs=1e-6)


def test_policy_step_raises_logprob_of_rewarded_response():
    engine = PolicyEngine(tiny_model(), EngineConfig(lr=1e-2))
    good, bad = traj([1, 2], [4, 5], "g", 1.0), traj([1, 2], [6, 7], "g", 0.0)
    before = engine.logprobs(collate([good, bad], 0)).sum(-1)
    for _ in range(3):
        metrics = policy_step(engine, TrainerConfig(), [good, bad], 0)
    after = engine.logprobs(collate([good, bad], 0)).sum(-1)
    assert after[0] > before[0] and after[1] < before[1]
    assert "train/rollout_logprob_abs_diff" in metrics and metrics["train/grad_norm"] > 0


def test_tool_tokens_get_no_gradient():
    model = tiny_model()
    engine = PolicyEngine(model)
    batch = batch_of()
    captured = {}

    def loss_fn(logp, rows):
        logp.retain_grad()
        captured["logp"] = logp
        mask = batch.response_mask[rows]
        return -(logp * mask).sum(), {}

    engine.train_step(batch, loss_fn)
    grad = captured["logp"].grad
    assert torch.all(grad[batch.response_mask == 0] == 0)
    assert torch.all(grad[batch.response_mask == 1] != 0)


@pytest.mark.parametrize("lora", [False, True])
def test_gradient_checkpointing_gives_the_same_step(lora):
    from agentrl.trainer.lora import apply_lora

    def engine(checkpointing):
        model = tiny_model()
        if lora:
            model = apply_lora(model, rank=2, alpha=4.0, target_modules=["q_proj", "v_proj"])
        return PolicyEngine(model, EngineConfig(lr=1e-2, gradient_checkpointing=checkpointing))

    plain, checkpointed = engine(False), engine(True)
    trajs = [traj([1, 2, 3], [4, 5, 6], "a", 1.0), traj([1, 2, 3], [6, 5, 4], "a", 0.0)]
    m_plain = policy_step(plain, TrainerConfig(), trajs, 0)
    m_ckpt = policy_step(checkpointed, TrainerConfig(), trajs, 0)
    assert m_ckpt["train/grad_norm"] == pytest.approx(m_plain["train/grad_norm"], rel=1e-5)
    for (name, p), q in zip(plain.model.named_parameters(), checkpointed.model.parameters(), strict=True):
        assert (p.grad is None) == (q.grad is None), name
        if p.grad is not None:
            assert torch.allclose(p.grad, q.grad, atol=1e-6), name


def test_step_reports_policy_entropy_and_advantage_stats():
    import math

    model = tiny_model()
    engine = PolicyEngine(model, EngineConfig(lr=1e-3))
    good, bad = traj([1, 2], [4, 5], "g", 1.0), traj([1, 2], [6, 7], "g", 0.0)
    batch = collate([good, bad], 0)
    with torch.no_grad():
        logits = model(input_ids=batch.input_ids).logits[:, batch.prompt_len - 1 : -1]  # predicting the responses
    expected = float(torch.distributions.Categorical(logits=logits).entropy().mean())
    metrics = policy_step(engine, TrainerConfig(), [good, bad], 0)
    vocab = model.config.vocab_size
    assert 0 < metrics["train/entropy"] <= math.log(vocab)
    assert metrics["train/entropy"] == pytest.approx(expected, rel=1e-4)
    assert metrics["train/advantage_max"] > 0 > metrics["train/advantage_min"]
    assert metrics["train/advantage_std"] > 0


@pytest.mark.parametrize(
    ("schedule", "expected"),
    [
        ("constant", [0.5, 1.0, 1.0, 1.0, 1.0, 1.0]),
        ("linear", [0.5, 1.0, 1.0, 0.7, 0.4, 0.1]),
        ("cosine", [0.5, 1.0, 1.0, 0.775, 0.325, 0.1]),
    ],
)
def test_lr_schedule_warms_up_then_decays_to_the_minimum_at_the_last_step(schedule, expected):
    config = EngineConfig(lr=1e-3, warmup_steps=2, total_steps=6, lr_schedule=schedule, min_lr_ratio=0.1)
    engine = PolicyEngine(tiny_model(), config)
    good, bad = traj([1, 2], [4, 5], "g", 1.0), traj([1, 2], [6, 7], "g", 0.0)
    lrs = [policy_step(engine, TrainerConfig(), [good, bad], 0)["train/lr"] for _ in expected]
    assert lrs == pytest.approx([1e-3 * f for f in expected], abs=1e-7)


def test_unknown_lr_schedule_is_rejected_by_the_config():
    with pytest.raises(ValueError, match="lr_schedule"):
        TrainerConfig(lr_schedule="step")


def test_entropy_bonus_alone_raises_the_entropy_of_the_generated_tokens_and_trains_zero_advantage_rows():
    from agentrl.trainer.forward import response_logprobs_and_entropy

    model = tiny_model()
    with torch.no_grad():  # a peaked policy, well below the uniform distribution's entropy
        model.get_output_embeddings().weight.mul_(30.0)
    engine = PolicyEngine(model, EngineConfig(lr=1e-3, micro_batch_tokens=4))  # a micro-batch per row
    trajs = [traj([1, 2], [4, 5], "g", 1.0), traj([1, 2], [6, 7], "g", 1.0)]  # equal rewards: advantage 0
    batch = collate(trajs, 0)

    def mean_entropy() -> float:
        with torch.no_grad():
            _, entropy = response_logprobs_and_entropy(engine.model, batch, slice(0, 2), torch.float32)
        return float(entropy[batch.response_mask.bool()].mean())

    before = mean_entropy()
    for _ in range(3):
        metrics = policy_step(engine, TrainerConfig(entropy_coef=1.0), trajs, 0)
    assert metrics["train/rows_trained"] == 2 and metrics["train/grad_norm"] > 0
    assert metrics["train/entropy_bonus"] == pytest.approx(metrics["train/entropy"], rel=1e-4)
    assert mean_entropy() > before
    plain = policy_step(PolicyEngine(tiny_model(), EngineConfig(lr=1e-2)), TrainerConfig(), trajs, 0)
    assert plain["train/rows_trained"] == 0  # without the bonus such rows are left out


def test_entropy_with_gradient_matches_the_metric_and_the_logprobs_are_unchanged():
    from agentrl.trainer.forward import response_logprobs, response_logprobs_and_entropy

    model, batch = tiny_model(), batch_of()
    rows = slice(0, 3)
    metric: list[float] = []
    plain = response_logprobs(model, batch, rows, torch.float32, entropy_out=metric)
    logp, entropy = response_logprobs_and_entropy(model, batch, rows, torch.float32)
    assert torch.allclose(plain, logp)
    real = batch.attention_mask[rows, batch.prompt_len :].bool()
    assert float(entropy.detach()[real].mean()) == pytest.approx(metric[0], rel=1e-5)
    assert torch.all(entropy[~real] == 0) and entropy.requires_grad
