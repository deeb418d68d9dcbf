"""Dataset loading: JSONL and Parquet files of `Sample` rows, verl-style columns accepted too, and Harbor tasks.

A row is either agentrl's own shape (`prompt`, `agent_name`, `ground_truth`, `reward_spec`, `extra_info`, ...) or
verl's (`prompt`, `data_source`, `reward_model: {ground_truth, style}`, `extra_info`, `agent_name`). `prompt` may
be a list of chat messages or a plain string (one user message). Rows of SWE-bench, SWE-smith and R2E-Gym load as
they ship (their format told by their columns, see `agentrl.swe.formats`): the problem statement is the prompt and
the task's columns are the extra info.

A folder or a `dataset.toml` in place of a file is Harbor tasks (`agentrl.harbor.dataset`): a task folder, a
folder of them, or a dataset manifest; each task becomes one sample whose prompt is its instruction.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agentrl.errors import UserError
from agentrl.types import Sample


class DatasetError(UserError):
    """A dataset file or row is unusable; the message names the file, row and field."""


def load_samples(path: str | Path, harbor_reader: str = "auto") -> list[Sample]:
    """Load every row of a `.jsonl`/`.json` or `.parquet` file as a `Sample` (Harbor tasks read as
    `harbor_reader` says: `data.harbor_reader`).

    Raises:
        DatasetError: the file is missing, of an unknown format, or a row is invalid (file, row, field named).
    """
    path = Path(path)
    if _is_harbor(path):
        from agentrl.harbor.dataset import task_samples
        from agentrl.harbor.package import resolve_reader

        return task_samples(path, resolve_reader(harbor_reader))
    if not path.is_file():
        raise DatasetError(f"dataset file {path} does not exist; check data.train_files / data.eval_files")
    return [_to_sample(row, path, i) for i, row in enumerate(_read_rows(path))]


def first_row_problem(
    path: str | Path, loop_problem: Callable[[str], str | None] | None = None, harbor_reader: str = "auto"
) -> str | None:
    """What is wrong with a dataset file, judged from its first row (None if nothing): missing, unreadable, empty,
    a first row that is not a valid sample, or (with `loop_problem`, which says what is wrong with a loop name) one
    naming an unknown agent loop."""
    path = Path(path)
    if _is_harbor(path):
        return _harbor_problem(path, harbor_reader)
    if not path.is_file():
        return f"dataset file {path} does not exist; check the path (relative paths are looked up in the recipe folder)"
    try:
        row = next(iter(_read_rows(path)), None)
        if row is None:
            return f"{path} holds no rows"
        sample = _to_sample(row, path, 0)
    except DatasetError as exc:
        return str(exc)
    except Exception as exc:  # a corrupt Parquet file, an unreadable file
        return f"cannot read {path}: {type(exc).__name__}: {exc}"
    if sample.agent_name and loop_problem is not None and (problem := loop_problem(sample.agent_name)):
        return f"{path}, row 0: agent_name: {problem}"
    return None


def load_datasets(paths: list[str], harbor_reader: str = "auto") -> list[Sample]:
    """Concatenate the samples of several files, in order."""
    return [s for p in paths for s in load_samples(p, harbor_reader)]


def run_samples(
    cfg: Any, split: str, loop_samples: Callable[[Any, str], list[Sample] | None] | None = None
) -> list[Sample]:
    """The samples of a run's `train` or `eval` split (`data.train_files` / `data.eval_files`).

    With an environment configured (`env.id` or `env.entry_point`) and no files for the split, the samples are
    generated from seeds (`env.num_train_seeds` training seeds, `env.num_eval_seeds` disjoint held-out seeds),
    played by `agent.name` unless that is the default `single_turn`, in which case by the `gym` loop.

    With no files for the split: with `data.reasoning_gym`, that dataset's generated questions; else the loop's own
    samples when `loop_samples` (the run's loop's `AgentLoopBase.samples`, passed by `agentrl.loops.hooks`) gives
    some, e.g. a verifiers environment's dataset (or eval dataset).

    Returns an empty list for an eval split without data; raises `DatasetError` for a train split without data.
    """
    if split not in ("train", "eval"):
        raise ValueError(f"split must be 'train' or 'eval', not {split!r}")
    files = cfg.data.train_files if split == "train" else cfg.data.eval_files
    if not files and cfg.data.reasoning_gym:
        from agentrl.envs.reasoning_gym import split_samples

        return split_samples(cfg.data, split, cfg.seed)
    if not files and loop_samples is not None and (own := loop_samples(cfg, split)) is not None:
        return own
    if not files and cfg.env.enabled:
        from agentrl.envs.dataset import seed_samples

        samples = seed_samples(cfg.env, "train" if split == "train" else "eval", env_rows_loop(cfg))
        if not samples and split == "train":
            raise DatasetError("env.num_train_seeds is 0: training needs episodes; set env.num_train_seeds >= 1")
        return samples
    if not files and split == "train":
        raise DatasetError(
            "data.train_files is empty: training needs data (JSONL or Parquet files), or an environment "
            "(env.id=FrozenLake-v1) whose episodes are generated from seeds"
        )
    samples = load_datasets(files, cfg.data.harbor_reader)
    if cfg.data.agent_name:  # e.g. another recipe's rows, played by this recipe's loop
        samples = [s.model_copy(update={"agent_name": cfg.data.agent_name}) for s in samples]
    return samples


def env_rows_loop(cfg: Any) -> str | None:
    """The loop named on rows generated from env seeds: `gym` when `agent.name` is left at `single_turn`, else
    None (the rows are played by `agent.name`)."""
    return "gym" if cfg.agent.name == "single_turn" else None


def _is_harbor(path: Path) -> bool:
    return path.is_dir() or path.name == "dataset.toml"


def _harbor_problem(path: Path, harbor_reader: str) -> str | None:
    """What is wrong with Harbor tasks: every task folder is read (task.toml, the files it needs), by the reader
    `harbor_reader` names (a missing `harbor` package, when it is asked for, is the problem)."""
    from agentrl.harbor.dataset import load_tasks
    from agentrl.harbor.package import resolve_reader

    try:
        load_tasks(path, resolve_reader(harbor_reader))
    except UserError as exc:
        return str(exc)
    return None


def _read_rows(path: Path) -> Iterator[Any]:
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".json"):
        yield from _read_jsonl(path)
    elif suffix == ".parquet":
        import pyarrow.parquet as pq

        for batch in pq.ParquetFile(path).iter_batches(batch_size=1024):  # lazily: a check reads one row
            yield from batch.to_pylist()
    else:
        raise DatasetError(f"{path}: unknown dataset format {suffix!r}; use .jsonl or .parquet")


def _read_jsonl(path: Path) -> Iterator[Any]:
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{path}, line {lineno}: not valid JSON ({exc.msg})") from None


def _to_sample(row: Any, path: Path, index: int) -> Sample:
    where = f"{path}, row {index}"
    if not isinstance(row, dict):
        raise DatasetError(f"{where}: a row must be a JSON object, got {type(row).__name__}")
    try:
        return Sample.model_validate(_normalize(row, where))
    except ValidationError as exc:
        problems = "; ".join(f"field {'.'.join(map(str, e['loc'])) or '(row)'}: {e['msg']}" for e in exc.errors())
        raise DatasetError(f"{where}: {problems}") from None


def _normalize(row: dict[str, Any], where: str) -> dict[str, Any]:
    """Map verl-style columns onto `Sample` fields."""
    row = dict(row)
    if _is_raw_swe_row(row):
        row = _from_swe_task(row, where)
    if "prompt" not in row:
        raise DatasetError(
            f"{where}: field prompt is missing; give a list of chat messages or a string (SWE-bench rows need "
            "instance_id and problem_statement)"
        )
    if isinstance(row["prompt"], str):
        row["prompt"] = [{"role": "user", "content": row["prompt"]}]
    reward_model = row.pop("reward_model", None)
    if reward_model is not None:
        if not isinstance(reward_model, dict):
            raise DatasetError(f"{where}: field reward_model must be an object with ground_truth")
        row.setdefault("ground_truth", reward_model.get("ground_truth"))
        style = reward_model.get("style")
        if style is not None:
            row.setdefault("reward_spec", {})["style"] = style
    if row.get("extra_info") is None:
        row.pop("extra_info", None)
    # Columns agentrl does not know (verl's `ability`, SWE-bench's fields, ...) are kept as extra info.
    for key in [k for k in row if k not in Sample.model_fields]:
        row.setdefault("extra_info", {})[key] = row.pop(key)
    return row


def _is_raw_swe_row(row: dict[str, Any]) -> bool:
    from agentrl.swe.formats import detect

    plain = "prompt" not in row and "problem_statement" in row and "instance_id" in row
    return plain or ("agent_name" not in row and detect(row) is not None)


def _from_swe_task(row: dict[str, Any], where: str) -> dict[str, Any]:
    """A raw task row: its columns mapped as its dataset's format says (told by its columns, or named by its data
    source; R2E-Gym's `prompt` column, which holds the fix, dropped), the problem statement as the prompt; the
    columns stay as extra info (the SWE loop reads them)."""
    from agentrl.swe.formats import format_of_source, normalize
    from agentrl.swe.task import TaskError

    try:
        row = normalize(row, format_of_source(row.get("data_source")), where)
    except TaskError as exc:
        raise DatasetError(str(exc)) from None
    row["prompt"] = str(row.get("problem_statement") or "")
    row.setdefault("id", str(row.get("instance_id") or ""))
    row.setdefault("data_source", f"swe/{row.get('repo') or 'unknown'}")
    return row


def write_seed_splits(folder: Path, row: Callable[[int], dict[str, Any]], splits: dict[str, range]) -> None:
    """Write `<folder>/<split>.jsonl`, one `row(seed)` per seed of each split (a recipe's `make_data.py` for loops
    that play an episode from a seed: textarena, openenv)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, seeds in splits.items():
        with (folder / f"{name}.jsonl").open("w") as f:
            f.writelines(json.dumps(row(seed)) + "\n" for seed in seeds)
