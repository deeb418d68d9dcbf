"""Reference policy and KL: hand-computed KL through a whole policy step, and KL = 0 at the first step."""

import math
from types import SimpleNamespace

import pytest
import torch

from agentrl.trainer.backend import LocalBackend
from agentrl.trainer.engine import EngineConfig, PolicyEngine
from agentrl.trainer.reference import ReferencePolicy
from agentrl.trainer.step import policy_step
from tests.trainer_cases import batch_of_trajectories, run_config, scored, tiny_model_dir


class Bigram(torch.nn.Module):
    """logits(next | x_t) = table[x_t]: a model whose logprobs are known by hand."""

    def __init__(self, table: torch.Tensor):
        super().__init__()
        self.table = torch.nn.Parameter(table.clone())

    def forward(self, input_ids, **_):
        return SimpleNamespace(logits=self.table[input_ids])


@pytest.mark.parametrize(
    ("estimator", "expected"),
    [
        # π(0|·) = 2/5, π(other|·) = 1/5, π_ref uniform 1/4: two tokens of each kind, token-mean
        ("k1", (2 * math.log(0.4 / 0.25) + 2 * math.log(0.2 / 0.25)) / 4),
        ("k3", (2 * (0.625 - math.log(0.625) - 1) + 2 * (1.25 - math.log(1.25) - 1)) / 4),
    ],
)
def test_policy_step_kl_matches_hand_computed_values(estimator, expected):
    table = torch.zeros(4, 4)
    table[:, 0] = math.log(2.0)
    engine = PolicyEngine(Bigram(table), EngineConfig(lr=0.0))
    reference = ReferencePolicy.frozen_copy(Bigram(torch.zeros(4, 4)))
    cfg = run_config(kl_coef=0.1, kl_estimator=estimator).trainer
    trajectories = [scored([1], [0, 0], "g", 1.0), scored([1], [2, 3], "g", 0.0)]
    metrics = policy_step(engine, cfg, trajectories, pad_token_id=0, reference=reference)
    assert metrics["train/kl"] == pytest.approx(expected, abs=1e-6)
    # at the first step the ratio is 1 and the group's advantages cancel in the token mean: loss = β·KL
    assert metrics["train/pg_loss"] == pytest.approx(0.0, abs=1e-7)
    assert metrics["train/loss"] == pytest.approx(0.1 * expected, abs=1e-6)


@pytest.mark.parametrize("lora_rank", [0, 4])
def test_kl_is_zero_at_the_first_step_and_grows_after(tmp_path, lora_rank):
    cfg = run_config(kl_coef=0.05, lora_rank=lora_rank, lora_alpha=8.0)
    backend = LocalBackend(cfg, tiny_model_dir(tmp_path), pad_token_id=0)
    first = backend.step(batch_of_trajectories())
    second = backend.step(batch_of_trajectories())
    assert abs(first["train/kl"]) < 1e-7
    assert second["train/kl"] > 1e-6


def test_kl_is_logged_without_a_penalty_when_a_reference_is_asked_for(tmp_path):
    backend = LocalBackend(run_config(use_reference=True), tiny_model_dir(tmp_path), pad_token_id=0)
    assert backend.trainer.reference is not None
    assert backend.step(batch_of_trajectories())["train/kl"] == pytest.approx(0.0, abs=1e-7)
    plain = LocalBackend(run_config(), tiny_model_dir(tmp_path / "plain"), pad_token_id=0)
    assert plain.trainer.reference is None and "train/kl" not in plain.step(batch_of_trajectories())
