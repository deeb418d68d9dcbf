"""A run's directory: where its files go, and the resolved configuration written there."""

from __future__ import annotations

import time
from pathlib import Path

from agentrl.config.schema import AgentRLConfig
from agentrl.errors import UserError


def output_dir(cfg: AgentRLConfig, kind: str) -> Path:
    """The run directory: `output_dir` if set, else runs/<recipe>-<kind>-<timestamp>; it gets the resolved
    configuration as `config.yaml` (data paths absolute), so a run can be read or repeated from its folder.

    Raises:
        UserError: a new training run (`trainer.resume=false`) in a folder that holds another training run's
            metrics or checkpoints (they would be mixed with the new run's and overwritten).
    """
    path = Path(cfg.output_dir or f"runs/{cfg.recipe or 'run'}-{kind}-{time.strftime('%Y%m%d-%H%M%S')}")
    if kind == "train" and not cfg.trainer.resume:
        refuse_a_finished_run(path)
    path.mkdir(parents=True, exist_ok=True)
    save_config(cfg, path / "config.yaml")
    return path


def refuse_a_finished_run(path: Path) -> None:
    """Raise `UserError` if `path` holds a training run's results: logged metrics or checkpoints."""
    metrics, checkpoints = path / "metrics.jsonl", path / "checkpoints"
    logged = metrics.is_file() and metrics.stat().st_size > 0
    saved = checkpoints.is_dir() and any(checkpoints.iterdir())
    if logged or saved:
        held = " and ".join(what for what, there in (("metrics", logged), ("checkpoints", saved)) if there)
        raise UserError(
            f"output_dir={path} holds the {held} of an earlier training run, which a new run would mix with its own "
            "and overwrite. Continue that run with trainer.resume=true, or give this one another (or an empty) "
            "output_dir."
        )


def save_config(cfg: AgentRLConfig, path: Path) -> None:
    """Write `cfg` as YAML to `path`."""
    from omegaconf import OmegaConf

    path.write_text(OmegaConf.to_yaml(cfg.model_dump(mode="json", by_alias=True)))
