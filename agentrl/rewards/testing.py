"""TINY RANDOM reward models, for tests ONLY: nothing here is a trained model.

`build_tiny_reward_model` saves a randomly initialised, 2-layer Llama sequence classifier next to a given
tokenizer, so tests of the reward-model plumbing (batching, devices, the HTTP server) need no hub access.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def build_tiny_reward_model(tokenizer: Any, path: str | Path, num_labels: int = 1, seed: int = 0) -> str:
    """Save a tiny random `LlamaForSequenceClassification` and `tokenizer` to `path`; return the folder."""
    import torch
    from transformers import LlamaConfig, LlamaForSequenceClassification

    torch.manual_seed(seed)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    config = LlamaConfig(  # type: ignore[call-arg]  # num_labels and pad_token_id go to PretrainedConfig
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        num_labels=num_labels,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = LlamaForSequenceClassification(config)
    with torch.no_grad():  # a random head with larger weights, so scores differ visibly between inputs
        model.score.weight.normal_(0.0, 1.0)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)
