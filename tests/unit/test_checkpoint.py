"""Checkpoint then resume: the next step equals the step an uninterrupted run takes."""

import pytest
import torch

from agentrl.errors import AgentRLError
from agentrl.trainer.backend import LocalBackend
from tests.trainer_cases import batch_of_trajectories, run_config, tiny_model_dir

COMPARED = ("train/loss", "train/pg_loss", "train/grad_norm", "train/lr", "train/kl", "train/ppo_kl")


@pytest.mark.parametrize("lora_rank", [0, 4], ids=["full", "lora"])
def test_resume_reproduces_the_next_step(tmp_path, lora_rank):
    # warmup makes the scheduler state matter, the reference makes the weights matter to the loss (KL)
    cfg = run_config(warmup_steps=4, kl_coef=0.1, lora_rank=lora_rank, lora_alpha=8.0)
    model_dir = tiny_model_dir(tmp_path / "model")
    batches = [batch_of_trajectories(), list(reversed(batch_of_trajectories()))]

    straight = LocalBackend(cfg, model_dir, pad_token_id=0)
    straight.step(batches[0])
    straight.save(tmp_path / "ckpt")
    rng_after_save = torch.get_rng_state()
    expected = straight.step(batches[1])
    expected_weights = straight.state_dict()

    torch.manual_seed(1234)  # a fresh process would have another RNG state: load must restore it
    resumed = LocalBackend(cfg, model_dir, pad_token_id=0)
    resumed.load(tmp_path / "ckpt")
    assert torch.equal(torch.get_rng_state(), rng_after_save)
    assert resumed.engine.step_count == 1
    got = resumed.step(batches[1])
    for key in COMPARED:
        assert got[key] == pytest.approx(expected[key], abs=1e-6), key
    weights = resumed.state_dict()
    assert max(float((weights[k] - v).abs().max()) for k, v in expected_weights.items()) < 1e-6


def test_lora_checkpoint_leaves_the_frozen_base_out(tmp_path):
    from torch.distributed.checkpoint import FileSystemReader

    backend = LocalBackend(run_config(lora_rank=4), tiny_model_dir(tmp_path / "model"), pad_token_id=0)
    backend.step(batch_of_trajectories())
    backend.save(tmp_path / "ckpt")
    keys = FileSystemReader(str(tmp_path / "ckpt" / "policy")).read_metadata().state_dict_metadata
    model_keys = [k for k in keys if k.startswith("model.")]
    assert model_keys and all(".lora_A." in k or ".lora_B." in k for k in model_keys)


def test_load_rejects_a_folder_that_is_no_checkpoint(tmp_path):
    backend = LocalBackend(run_config(), tiny_model_dir(tmp_path / "model"), pad_token_id=0)
    with pytest.raises(AgentRLError, match="not a trainer checkpoint"):
        backend.load(tmp_path)


def test_a_checkpoint_folder_is_a_model_its_policy_exported_once(tmp_path):
    from transformers import AutoModelForCausalLM

    from agentrl.models import resolve_model
    from agentrl.trainer.checkpoint_dir import TrainerState, save_checkpoint

    model_dir = tiny_model_dir(tmp_path / "model")
    backend = LocalBackend(run_config(lr=1e-2), model_dir, pad_token_id=0)
    backend.step(batch_of_trajectories())
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(f"model: {model_dir}\n")
    checkpoint = save_checkpoint(run, TrainerState(step=1, cursor={}, version=1), backend.save)

    folder = resolve_model(str(checkpoint))
    exported = AutoModelForCausalLM.from_pretrained(folder).state_dict()
    trained, base = backend.state_dict(), AutoModelForCausalLM.from_pretrained(model_dir).state_dict()
    assert all(torch.equal(exported[name], weights) for name, weights in trained.items())
    assert any(not torch.equal(base[name], weights) for name, weights in trained.items())  # it did train
    assert resolve_model(str(checkpoint)) == folder  # exported once: the second call reads the folder


def test_a_checkpoint_without_its_run_s_config_is_refused_naming_what_is_missing(tmp_path):
    from agentrl.errors import ModelNotFoundError
    from agentrl.models import resolve_model

    checkpoint = tmp_path / "run" / "checkpoints" / "step_000001"
    (checkpoint / "engine" / "policy").mkdir(parents=True)
    (checkpoint / "trainer_state.json").write_text("{}")
    with pytest.raises(ModelNotFoundError, match=r"its run's config.yaml .* is missing"):
        resolve_model(str(checkpoint))
