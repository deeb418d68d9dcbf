"""Where Harbor tasks come from: `data.train_files=[path]` with `path` one of

* a task folder (it holds task.toml);
* a dataset folder, holding `dataset.toml`, or that file itself: Harbor's manifest, whose `[[tasks]]` name
  packages (`name = "org/task"`, `digest = "sha256:..."`) found among the folders next to it — by the
  `[task].name` of their task.toml, else by folder name. A digest pins a registry copy; local folders are used
  as they are, so digests are not checked;
* any other folder: every subfolder holding a task.toml, in name order.

```python
samples = task_samples("recipes/harbor/tasks")    # one Sample per task, played by `harbor_agent`
```
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

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


def task_dirs(path: str | Path) -> list[Path]:
    """The task folders `path` names (see the module docstring), in order.

    Raises:
        HarborTaskError: the path is missing, the manifest is invalid or names a task no folder holds, or a
            folder holds no task.
    """
    path = Path(path).resolve()
    if path.name == MANIFEST and path.is_file():
        return manifest_dirs(path)
    if not path.is_dir():
        raise HarborTaskError(f"{path} does not exist; give a task folder, a folder of them, or a dataset.toml")
    if (path / "task.toml").is_file():
        return [path]
    if (path / MANIFEST).is_file():
        return manifest_dirs(path / MANIFEST)
    found = sorted(child for child in path.iterdir() if (child / "task.toml").is_file())
    if not found:
        raise HarborTaskError(
            f"{path} holds no Harbor task: neither task.toml, dataset.toml nor subfolders with a task.toml"
        )
    return found


def manifest_dirs(manifest: Path) -> list[Path]:
    """The folders of the tasks a dataset.toml names, looked up next to it.

    Raises:
        HarborTaskError: the manifest is invalid, or names tasks no folder next to it holds (all listed).
    """
    try:
        parsed = DatasetManifest.model_validate(tomllib.loads(manifest.read_text()))
    except tomllib.TOMLDecodeError as exc:
        raise HarborTaskError(f"{manifest} is not valid TOML: {exc}") from None
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise HarborTaskError(f"{manifest}: {problems}") from None
    if not parsed.tasks:
        raise HarborTaskError(f"{manifest} names no tasks: add [[tasks]] entries with name = 'org/task'")
    local = _local_tasks(manifest.parent)
    missing = [ref.name for ref in parsed.tasks if _find(ref.name, local) is None]
    if missing:
        raise HarborTaskError(
            f"{manifest} names tasks no folder next to it holds: {', '.join(missing)}; put each task's folder in "
            f"{manifest.parent} (found by its task.toml's [task].name, or by folder name)"
        )
    return [found for ref in parsed.tasks if (found := _find(ref.name, local)) is not None]


def load_tasks(path: str | Path) -> list[HarborTask]:
    """Every task `path` names.

    Raises:
        HarborTaskError: see `task_dirs` and `agentrl.harbor.task.load_task`.
    """
    return [load_task(d) for d in task_dirs(path)]


def task_samples(path: str | Path) -> list[Sample]:
    """One sample per task `path` names (see `HarborTask.to_sample`)."""
    return [task.to_sample() for task in load_tasks(path)]


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
