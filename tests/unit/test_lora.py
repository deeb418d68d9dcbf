"""LoRA: only adapters train; the merged state dict has the base model's keys and the adapted weights."""

import copy

import pytest
import torch

from agentrl.errors import AgentRLError
from agentrl.trainer.backend import LocalBackend
from agentrl.trainer.lora import apply_lora, lora_scaling, merge_lora
from tests.tiny_models import tiny_llama
from tests.trainer_cases import batch_of_trajectories, run_config, tiny_model_dir


def lora_backend(tmp_path, **trainer):
    cfg = run_config(lora_rank=4, lora_alpha=8.0, **trainer)
    return LocalBackend(cfg, tiny_model_dir(tmp_path), pad_token_id=0)


def test_a_lora_step_changes_only_adapter_parameters(tmp_path):
    backend = lora_backend(tmp_path)
    model = backend.engine.model
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all(".lora_A." in n or ".lora_B." in n for n in trainable)
    backend.step(batch_of_trajectories())
    changed = {n for n, p in model.named_parameters() if not torch.equal(p, before[n])}
    assert changed and changed <= trainable
    assert any(".lora_B." in n for n in changed)  # B starts at zero, so the first step must move it


def test_merged_state_dict_has_base_keys_and_differs_from_base(tmp_path):
    base = tiny_llama().state_dict()
    backend = lora_backend(tmp_path)
    initial = backend.state_dict()
    assert set(initial) == set(base)
    assert all(torch.equal(initial[k], base[k]) for k in base)  # B = 0: merging changes nothing yet
    backend.step(batch_of_trajectories())
    merged = backend.state_dict()
    assert set(merged) == set(base) and all(v.device.type == "cpu" for v in merged.values())
    differs = {k for k in base if not torch.equal(merged[k], base[k])}
    assert any("q_proj" in k for k in differs) and "model.embed_tokens.weight" not in differs
    # the same weights as peft's own merge
    reference = copy.deepcopy(backend.engine.model).merge_and_unload().state_dict()
    assert all(torch.allclose(merged[k], reference[k], atol=1e-6) for k in base)


def test_merge_lora_by_hand():
    w, a, b = torch.ones(2, 3), torch.tensor([[1.0, 0.0, 2.0]]), torch.tensor([[1.0], [3.0]])
    state = {
        "base_model.model.layer.q_proj.base_layer.weight": w,
        "base_model.model.layer.q_proj.lora_A.default.weight": a,
        "base_model.model.layer.q_proj.lora_B.default.weight": b,
        "base_model.model.norm.weight": torch.ones(3),
    }
    merged = merge_lora(state, scaling=0.5)
    assert set(merged) == {"layer.q_proj.weight", "norm.weight"}
    assert merged["layer.q_proj.weight"].tolist() == [[1.5, 1.0, 2.0], [2.5, 1.0, 4.0]]


def test_scaling_and_unknown_target_modules():
    model = apply_lora(tiny_llama(), rank=4, alpha=8.0, target_modules=["q_proj"])
    assert lora_scaling(model) == 2.0
    with pytest.raises(AgentRLError, match="lora_target_modules"):
        apply_lora(tiny_llama(), rank=4, alpha=8.0, target_modules=["no_such_proj"])
