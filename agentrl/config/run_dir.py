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
            metrics or checkpoints (they would be mixed with the new run's and overwritten), or a resumed one in a
            folder whose run logged metrics but saved no checkpoint to resume from (it would start over on them);
            a rollout or an evaluation in a folder holding an earlier one's trajectories (it would overwrite them).
    """
    path = Path(cfg.output_dir or f"runs/{cfg.recipe or 'run'}-{kind}-{time.strftime('%Y%m%d-%H%M%S')}")
    if kind == "train":
        (refuse_nothing_to_resume if cfg.trainer.resume else refuse_a_finished_run)(path)
    elif kind in ("rollout", "eval"):
        refuse_earlier_trajectories(path)
    path.mkdir(parents=True, exist_ok=True)
    save_config(cfg, path / "config.yaml")
    return path


def refuse_a_finished_run(path: Path) -> None:
    """Raise `UserError` if `path` holds a training run's results: logged metrics or checkpoints."""
    logged, saved = _logged(path), (path / "checkpoints").is_dir() and any((path / "checkpoints").iterdir())
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


def refuse_nothing_to_resume(path: Path) -> None:
    """Raise `UserError` if `path` holds a training run's metrics but no checkpoint (`step_*`) to resume it from."""
    if _logged(path) and not any(p.is_dir() for p in (path / "checkpoints").glob("step_*")):
        raise UserError(
            f"trainer.resume=true, but output_dir={path} holds no checkpoint to resume from, only the metrics of an "
            "earlier run (which a run from step 1 would mix with its own). Start the new run in another (or an "
            "empty) output_dir; set trainer.save_every to save checkpoints."
        )


def refuse_earlier_trajectories(path: Path) -> None:
    """Raise `UserError` if `path` holds the trajectories of a rollout or evaluation (`trajectories.jsonl`)."""
    trajectories = path / "trajectories.jsonl"
    if trajectories.is_file() and trajectories.stat().st_size > 0:
        raise UserError(
            f"output_dir={path} holds the trajectories of an earlier rollout or evaluation, which this one would "
            "overwrite: give it another (or an empty) output_dir."
        )


def _logged(path: Path) -> bool:
    metrics = path / "metrics.jsonl"
    return metrics.is_file() and metrics.stat().st_size > 0
