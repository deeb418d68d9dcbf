"""Where Harbor tasks come from: `data.train_files=[path]` with `path` one of

* a task folder (it holds task.toml);
* a dataset folder, holding `dataset.toml`, or that file itself: Harbor's manifest, whose `[[tasks]]` name
  packages (`name = "org/task"`, `digest = "sha256:..."`) found among the folders next to it — by the
  `[task].name` of their task.toml, else by folder name. A digest pins a registry copy; local folders are used
  as they are, so digests are not checked;
* any other folder: every subfolder holding a task.toml, in name order.

With `reader="harbor"`, Harbor's package reads the manifest and every task folder (`agentrl.harbor.package`);
finding a manifest's tasks among the folders next to it stays agentrl's: Harbor looks names up in its registry,
online, and agentrl trains offline on the folders it is given.

```python
samples = task_samples("recipes/harbor/tasks")    # one Sample per task, played by `harbor_agent`
```
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentrl.harbor.package import manifest_names, read_tasks
from agentrl.harbor.task import HarborTask, HarborTaskError, load_task, read_config
from agentrl.types import Sample

MANIFEST = "dataset.toml"


class DatasetTaskRef(BaseModel):
    """One `[[tasks]]` entry of a dataset.toml."""

    model_config = ConfigDict(extra="ignore")

    name: str = Field(description="the task's package name, 'org/name'")
    digest: str = Field("", description="the registry version's content hash (not checked for local folders)")


class DatasetManifest(BaseModel):
    """A dataset.toml (Harbor's `DatasetManifest`, the fields agentrl reads)."""

    model_config = ConfigDict(extra="ignore")

    tasks: list[DatasetTaskRef] = Field(default_factory=list)


def is_task_source(path: str | Path) -> bool:
    """Whether `path` names Harbor tasks (a folder or a dataset.toml) rather than a JSONL/Parquet file."""
    path = Path(path)
    return path.is_dir() or path.name == MANIFEST


Reader = Literal["harbor", "agentrl"]


def task_dirs(path: str | Path, reader: Reader = "agentrl") -> list[Path]:
    """The task folders `path` names (see the module docstring), in order.

    Raises:
        HarborTaskError: the path is missing, the manifest is invalid or names a task no folder holds, or a
            folder holds no task.
    """
    path = Path(path).resolve()
    if path.name == MANIFEST and path.is_file():
        return manifest_dirs(path, reader)
    if not path.is_dir():
        raise HarborTaskError(f"{path} does not exist; give a task folder, a folder of them, or a dataset.toml")
    if (path / "task.toml").is_file():
        return [path]
    if (path / MANIFEST).is_file():
        return manifest_dirs(path / MANIFEST, reader)
    found = sorted(child for child in path.iterdir() if (child / "task.toml").is_file())
    if not found:
        raise HarborTaskError(
            f"{path} holds no Harbor task: neither task.toml, dataset.toml nor subfolders with a task.toml"
        )
    return found


def manifest_dirs(manifest: Path, reader: Reader = "agentrl") -> list[Path]:
    """The folders of the tasks a dataset.toml names, looked up next to it.

    Raises:
        HarborTaskError: the manifest is invalid, or names tasks no folder next to it holds (all listed).
    """
    names = manifest_names(manifest) if reader == "harbor" else _manifest_names(manifest)
    if not names:
        raise HarborTaskError(f"{manifest} names no tasks: add [[tasks]] entries with name = 'org/task'")
    local = _local_tasks(manifest.parent)
    missing = [name for name in names if _find(name, local) is None]
    if missing:
        raise HarborTaskError(
            f"{manifest} names tasks no folder next to it holds: {', '.join(missing)}; put each task's folder in "
            f"{manifest.parent} (found by its task.toml's [task].name, or by folder name)"
        )
    return [found for name in names if (found := _find(name, local)) is not None]


def _manifest_names(manifest: Path) -> list[str]:
    try:
        parsed = DatasetManifest.model_validate(tomllib.loads(manifest.read_text()))
    except tomllib.TOMLDecodeError as exc:
        raise HarborTaskError(f"{manifest} is not valid TOML: {exc}") from None
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise HarborTaskError(f"{manifest}: {problems}") from None
    return [ref.name for ref in parsed.tasks]


def load_tasks(path: str | Path, reader: Reader = "agentrl") -> list[HarborTask]:
    """Every task `path` names, read by Harbor's package (`reader="harbor"`, one call for them all) or by
    agentrl's own reader.

    Raises:
        HarborTaskError: see `task_dirs` and `agentrl.harbor.task.load_task`.
        HarborPackageError: `harbor` is asked for and no interpreter has it, or it refused the manifest.
    """
    dirs = task_dirs(path, reader)
    if reader == "harbor":
        read_tasks(dirs)
    return [load_task(d, reader) for d in dirs]


def task_samples(path: str | Path, reader: Reader = "agentrl") -> list[Sample]:
    """One sample per task `path` names (see `HarborTask.to_sample`)."""
    return [task.to_sample() for task in load_tasks(path, reader)]


def _local_tasks(folder: Path) -> dict[str, Path]:
    """Task folders of `folder` by `[task].name` and by folder name."""
    out: dict[str, Path] = {}
    for child in sorted(folder.iterdir()):
        toml = child / "task.toml"
        if not toml.is_file():
            continue
        out.setdefault(child.name, child)
        try:
            config = read_config(toml)
        except HarborTaskError:
            continue  # reported when the task is loaded
        if config.task is not None:
            out[config.task.name] = child
    return out


def _find(name: str, local: dict[str, Path]) -> Path | None:
    return local.get(name) or local.get(name.rsplit("/", 1)[-1])
