"""Shared cases of the trainer-backend tests: a tiny Llama saved as a model folder, scored trajectories, configs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import LlamaForCausalLM

from agentrl.config.schema import AgentRLConfig
from agentrl.types import Segment, Trajectory
from tests.tiny_models import tiny_llama


def tiny_model_dir(folder: Path, seed: int = 0, tied: bool = False) -> str:
    """A tiny random Llama saved as a Hugging Face model folder (loaded like any model path); `tied`: its output
    head shares the input embeddings, as SmolLM2's does."""
    model = tiny_llama(seed)
    if tied:
        config = model.config
        config.tie_word_embeddings = True
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.save_pretrained(folder)
    return str(folder)


def scored(prompt: list[int], response: list[int], group: str, reward: float, logprob: float = -1.0) -> Trajectory:
    """A one-turn trajectory with a reward."""
    return Trajectory(
        segments=[
            Segment(token_ids=prompt, trainable=False),
            Segment(token_ids=response, trainable=True, logprobs=[logprob] * len(response)),
        ],
        group_id=group,
        reward=reward,
    )


def batch_of_trajectories() -> list[Trajectory]:
    """Two groups, uneven lengths, one with a tool segment in the middle."""
    with_tool = scored([7], [8, 9], "b", 1.0)
    with_tool.segments += [
        Segment(token_ids=[10, 11], trainable=False, role="tool"),
        Segment(token_ids=[5, 6], trainable=True, logprobs=[-1.0, -1.0]),
    ]
    return [
        scored([1, 2, 3], [4, 5, 6], "a", 1.0),
        scored([1, 2], [6, 5], "a", 0.0),
        with_tool,
        scored([7, 7], [9], "b", 0.0),
        scored([3], [2, 2, 2, 2], "a", 0.5),
    ]


def run_config(**trainer: Any) -> AgentRLConfig:
    """A run config with `trainer.*` overrides (lr 1e-2 so that steps visibly change the weights)."""
    return AgentRLConfig.model_validate({"trainer": {"lr": 1e-2, **trainer}})
