"""The run directory's checkpoints: `checkpoints/step_XXXX/{engine/, trainer_state.json}`, written atomically.

The engine folder holds what the backend saves (model, optimizer, scheduler, RNG of every rank); the trainer state
holds the step, the data position and the policy version. A checkpoint becomes visible only once complete (it is
written under a temporary name, then renamed), so an interrupted save is never resumed from.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

KEEP_LAST = 2
STATE_FILE = "trainer_state.json"


@dataclass
class TrainerState:
    """What the loop needs besides the engine to continue a run."""

    step: int
    cursor: dict[str, int]
    version: int


def checkpoint_root(run_dir: Path) -> Path:
    return Path(run_dir) / "checkpoints"


def save_checkpoint(run_dir: Path, state: TrainerState, save_engine: Callable[[Path], None]) -> Path:
    """Write the checkpoint of `state.step` (engine via `save_engine(folder)`); keep the last `KEEP_LAST`."""
    root = checkpoint_root(run_dir)
    final = root / f"step_{state.step:06d}"
    partial = root / f".partial-step_{state.step:06d}"
    shutil.rmtree(partial, ignore_errors=True)
    (partial / "engine").mkdir(parents=True)
    save_engine(partial / "engine")
    (partial / STATE_FILE).write_text(json.dumps(asdict(state), indent=2))
    shutil.rmtree(final, ignore_errors=True)
    partial.rename(final)
    for old in _complete(root)[:-KEEP_LAST]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def latest_checkpoint(run_dir: Path) -> tuple[Path, TrainerState] | None:
    """The newest complete checkpoint of a run and its trainer state, or None."""
    complete = _complete(checkpoint_root(run_dir))
    if not complete:
        return None
    folder = complete[-1]
    return folder, TrainerState(**json.loads((folder / STATE_FILE).read_text()))


def _complete(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    found = [p for p in root.glob("step_*") if (p / STATE_FILE).is_file()]
    return sorted(found, key=lambda p: int(p.name.removeprefix("step_")))
