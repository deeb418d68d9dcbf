"""A run's directory: where its files go, and the resolved configuration written there."""

from __future__ import annotations

import time
from pathlib import Path

from agentrl.config.schema import AgentRLConfig


def output_dir(cfg: AgentRLConfig, kind: str) -> Path:
    """The run directory: `output_dir` if set, else runs/<recipe>-<kind>-<timestamp>; it gets the resolved
    configuration as `config.yaml` (data paths absolute), so a run can be read or repeated from its folder."""
    path = Path(cfg.output_dir or f"runs/{cfg.recipe or 'run'}-{kind}-{time.strftime('%Y%m%d-%H%M%S')}")
    path.mkdir(parents=True, exist_ok=True)
    save_config(cfg, path / "config.yaml")
    return path


def save_config(cfg: AgentRLConfig, path: Path) -> None:
    """Write `cfg` as YAML to `path`."""
    from omegaconf import OmegaConf

    path.write_text(OmegaConf.to_yaml(cfg.model_dump(mode="json", by_alias=True)))
