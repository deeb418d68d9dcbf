"""The local TrainBackend: protocol, weights for sync, RNG hygiene, engine settings, micro-batches."""

import pytest
import torch

from agentrl.trainer.backend import LocalBackend, TrainBackend, make_backend
from agentrl.trainer.batch import collate
from agentrl.trainer.engine import EngineConfig, PolicyEngine, engine_config
from tests.tiny_models import tiny_llama
from tests.trainer_cases import batch_of_trajectories, run_config, tiny_model_dir


def test_one_rank_is_a_local_backend_whose_weights_are_a_cpu_snapshot(tmp_path):
    backend = make_backend(run_config(), tiny_model_dir(tmp_path), pad_token_id=0)
    assert isinstance(backend, LocalBackend) and isinstance(backend, TrainBackend)
    weights = backend.state_dict()
    assert set(weights) == set(tiny_llama().state_dict())
    assert all(v.device.type == "cpu" for v in weights.values())
    frozen = {k: v.clone() for k, v in weights.items()}
    metrics = backend.step(batch_of_trajectories())
    assert all(torch.equal(weights[k], frozen[k]) for k in weights)  # training on leaves the snapshot alone
    assert any(not torch.equal(v, frozen[k]) for k, v in backend.state_dict().items())
    assert {"train/loss", "train/grad_norm", "train/rollout_logprob_abs_diff", "train/tokens"} <= set(metrics)
    backend.close()


@pytest.mark.parametrize("lora_rank", [0, 2])
def test_tied_head_is_left_out_of_the_weights_and_the_hf_server_accepts_them(tmp_path, lora_rank):
    from agentrl.models import load_model
    from agentrl.rollout.servers.hf.weights import validate_state_dict

    model_dir = tiny_model_dir(tmp_path, tied=True)
    server_model = load_model(model_dir)
    assert server_model.lm_head.weight is server_model.model.embed_tokens.weight
    weights = LocalBackend(run_config(lora_rank=lora_rank), model_dir, 0).state_dict()
    assert set(weights) == set(server_model.state_dict()) - {"lm_head.weight"}
    validate_state_dict(server_model, weights)  # raises if the hf server would refuse them


def test_building_a_backend_leaves_the_callers_torch_rng_alone(tmp_path):
    model = tiny_model_dir(tmp_path)
    torch.manual_seed(7)
    state = torch.get_rng_state()
    LocalBackend(run_config(lora_rank=2), model, 0)
    assert torch.equal(torch.get_rng_state(), state)


def test_lora_init_is_the_same_on_every_build(tmp_path):
    model = tiny_model_dir(tmp_path)
    a = LocalBackend(run_config(lora_rank=2), model, 0).engine.model.state_dict()
    b = LocalBackend(run_config(lora_rank=2), model, 0).engine.model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)  # ranks must start from identical adapters


def test_engine_config_follows_the_trainer_config():
    cfg = run_config(
        lr=3e-5,
        warmup_steps=2,
        lr_schedule="cosine",
        min_lr_ratio=0.1,
        grad_clip=0.5,
        micro_batch_tokens=99,
        gradient_checkpointing=True,
    )
    assert engine_config(cfg.trainer) == EngineConfig(
        lr=3e-5,
        warmup_steps=2,
        total_steps=cfg.trainer.steps,
        lr_schedule="cosine",
        min_lr_ratio=0.1,
        grad_clip=0.5,
        micro_batch_tokens=99,
        dtype="auto",
        gradient_checkpointing=True,
    )
    assert PolicyEngine(tiny_llama(), engine_config(cfg.trainer)).compute_dtype == torch.float32  # auto on CPU


# The rows' columns (prompts left-padded to 3, responses after): [0, 6), [1, 5), [2, 9), [1, 4), [2, 7). With 24
# tokens, rows 0-1 take 2 x 6 and row 2 would widen them to 3 x 9; rows 2-4 span [1, 9): 3 x 8.
@pytest.mark.parametrize(("budget", "expected"), [(10_000, [5]), (24, [2, 3]), (1, [1, 1, 1, 1, 1])])
def test_micro_batches_fill_the_token_budget(budget, expected):
    batch = collate(batch_of_trajectories(), pad_token_id=0)  # 5 rows padded to 9 columns
    engine = PolicyEngine(tiny_llama(), EngineConfig(micro_batch_tokens=budget))
    micro = engine.micro_batches(batch)
    assert [s.stop - s.start for s, _ in micro] == expected and all(real for _, real in micro)
