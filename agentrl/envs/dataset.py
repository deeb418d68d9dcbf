"""Datasets generated from seeds: one `Sample` per episode, the seed in `extra_info`.

Training seeds are `train_seed_start, +1, ...`; held-out seeds start at `eval_seed_start`, and the config
validation keeps the two ranges apart, so held-out episodes are never trained on.
"""

from __future__ import annotations

from typing import Literal

from agentrl.config.schema import EnvConfig
from agentrl.envs.factory import env_name
from agentrl.types import Sample


def seed_samples(cfg: EnvConfig, split: Literal["train", "eval"], agent_name: str | None = "gym") -> list[Sample]:
    """The episodes of a split as samples with an empty prompt (the `gym` loop builds it from the env).

    Args:
        cfg: the `env:` config (seed counts and starts).
        split: `train` or `eval` (held-out seeds).
        agent_name: the loop that plays them (None: the run's `agent.name`).
    """
    start, count = (
        (cfg.train_seed_start, cfg.num_train_seeds) if split == "train" else (cfg.eval_seed_start, cfg.num_eval_seeds)
    )
    name = env_name(cfg)
    return [
        Sample(
            prompt=[],
            agent_name=agent_name,
            data_source=f"gym/{name}",
            extra_info={"seed": seed, "split": split},
            id=f"{name}/{split}/{seed}",
        )
        for seed in range(start, start + count)
    ]
