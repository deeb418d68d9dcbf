"""The SWE-bench task format: one instance = a repository at a commit, an issue, a gold patch and its tests.

Rows of SWE-bench, SWE-bench Verified, SWE-Gym and SWE-smith load unchanged (`FAIL_TO_PASS` may be a list or a
JSON string of one); fields agentrl adds are optional:

| field | meaning |
|---|---|
| `instance_id`, `repo`, `base_commit` | the task, the repository (`owner/name`), the commit the agent starts from |
| `problem_statement` | the issue text the agent sees |
| `patch` / `test_patch` | the gold fix / the tests that check it (applied only when grading) |
| `FAIL_TO_PASS` / `PASS_TO_PASS` | pytest node ids that must go from failing to passing / keep passing |
| `image_name` | the Docker image holding the repository at `repo_dir` (SWE-bench's naming is derived otherwise) |
| `repo_dir` | where the repository is in the image (default `/testbed`, SWE-bench's) |
| `env_setup` | shell lines run before the tests (e.g. activating a conda env) |
| `image_build` | how agentrl's own task images are built (see `agentrl.swe.images`) |
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agentrl.errors import UserError
from agentrl.types import Message, Sample

DEFAULT_REPO_DIR = "/testbed"
SWEBENCH_ENV_SETUP = "source /opt/miniconda3/bin/activate testbed"
"""SWE-bench's evaluation images keep the test environment in this conda env."""


class TaskError(UserError):
    """A SWE task row is unusable; the message names the row and the field."""


class SWETask(BaseModel):
    """One SWE-bench-format task instance (frozen). Unknown columns are kept (`model_extra`)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    instance_id: str
    problem_statement: str
    repo: str = ""
    base_commit: str = ""
    patch: str = ""
    test_patch: str = ""
    FAIL_TO_PASS: list[str] = Field(default_factory=list)
    PASS_TO_PASS: list[str] = Field(default_factory=list)
    version: str | None = None
    hints_text: str | None = None
    created_at: str | None = None
    environment_setup_commit: str | None = None
    image_name: str | None = None
    repo_dir: str = DEFAULT_REPO_DIR
    env_setup: str | None = None
    image_build: dict[str, Any] | None = None

    @field_validator("FAIL_TO_PASS", "PASS_TO_PASS", mode="before")
    @classmethod
    def _json_list(cls, value: Any) -> Any:
        if isinstance(value, str):  # SWE-bench stores them as JSON strings
            try:
                return json.loads(value) if value.strip() else []
            except json.JSONDecodeError as exc:
                raise ValueError(f"not a JSON list of test ids: {exc.msg}") from None
        return [] if value is None else list(value)

    @field_validator("version", "created_at", mode="before")
    @classmethod
    def _as_text(cls, value: Any) -> Any:
        return None if value is None else str(value)  # parquet gives floats (0.12) and timestamps

    @property
    def image(self) -> str:
        """The Docker image of the task: `image_name`, or SWE-bench's naming for its evaluation images."""
        if self.image_name:
            return self.image_name
        extra = self.model_extra or {}
        for key in ("docker_image", "image"):
            if isinstance(extra.get(key), str) and extra[key]:
                return extra[key]
        return f"swebench/sweb.eval.x86_64.{self.instance_id.replace('__', '_1776_').lower()}:latest"

    @property
    def setup_script(self) -> str:
        """Shell lines run before tests: `env_setup`, or SWE-bench's conda activation for its images."""
        if self.env_setup is not None:
            return self.env_setup
        return SWEBENCH_ENV_SETUP if self.image.startswith("swebench/") else ""

    @property
    def tests(self) -> list[str]:
        """FAIL_TO_PASS then PASS_TO_PASS ids."""
        return [*self.FAIL_TO_PASS, *self.PASS_TO_PASS]

    @classmethod
    def from_row(cls, row: dict[str, Any], where: str = "row") -> SWETask:
        """Validate one dataset row.

        Raises:
            TaskError: a required field is missing or malformed (all problems listed).
        """
        try:
            return cls.model_validate(row)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(row)'}: {e['msg']}" for e in exc.errors())
            raise TaskError(f"{where} is not a SWE-bench task: {problems}") from None

    @classmethod
    def from_sample(cls, sample: Sample) -> SWETask:
        """The task a `Sample` carries: its `extra_info` holds the SWE-bench columns (as `agentrl.data` loads
        them), or a nested `extra_info["swe"]`; a missing problem statement falls back to the prompt's text.

        Raises:
            TaskError: the sample is not a SWE task, saying which fields are missing.
        """
        info = dict(sample.extra_info.get("swe") or sample.extra_info)
        if "instance_id" not in info and sample.id:
            info["instance_id"] = sample.id
        if not info.get("problem_statement"):
            users = [m.content for m in sample.prompt if m.role == "user" and isinstance(m.content, str)]
            info["problem_statement"] = "\n\n".join(users)
        return cls.from_row(info, where=f"sample {sample.id or ''}".strip())

    def to_row(self, prompt: str | None = None, agent_name: str = "swe_agent") -> dict[str, Any]:
        """The task as a dataset row `agentrl.data` loads: the SWE-bench columns, plus `prompt` (the problem
        statement unless given), `agent_name`, `id` and `data_source`."""
        row: dict[str, Any] = self.model_dump(exclude_none=True)  # (a task read from a row may carry its keys)
        row.update(
            {
                "id": self.instance_id,
                "agent_name": agent_name,
                "data_source": f"swe/{self.repo or 'unknown'}",
                "prompt": [{"role": "user", "content": prompt or self.problem_statement}],
            }
        )
        return row

    def to_sample(self, agent_name: str = "swe_agent") -> Sample:
        """A `Sample` for this task (its SWE-bench columns in `extra_info`)."""
        row = self.to_row(agent_name=agent_name)
        head = {k: row.pop(k) for k in ("id", "agent_name", "data_source", "prompt")}
        return Sample(
            id=head["id"],
            agent_name=head["agent_name"],
            data_source=head["data_source"],
            prompt=[Message(**m) for m in head["prompt"]],
            extra_info=row,
        )


def load_tasks(path: str | Path) -> list[SWETask]:
    """Every task of a `.jsonl`/`.json` or `.parquet` file of SWE-bench rows (loaded unchanged).

    Raises:
        TaskError: the file is missing or a row is not a task (file and row named).
    """
    path = Path(path)
    if not path.is_file():
        raise TaskError(f"task file {path} does not exist")
    return [SWETask.from_row(row, where=f"{path}, row {i}") for i, row in enumerate(_rows(path))]


def _rows(path: Path) -> Iterator[dict[str, Any]]:
    if path.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq

        yield from pq.read_table(path).to_pylist()
        return
    if path.suffix.lower() not in (".jsonl", ".json"):
        raise TaskError(f"{path}: unknown task file format {path.suffix!r}; use .jsonl or .parquet")
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    raise TaskError(f"{path}, line {lineno}: not valid JSON ({exc.msg})") from None


def write_rows(tasks: list[SWETask], path: str | Path, agent_name: str = "swe_agent") -> None:
    """Write tasks as dataset rows (`SWETask.to_row`), one JSON object a line."""
    with Path(path).open("w", encoding="utf-8") as f:
        for task in tasks:
            f.write(json.dumps(task.to_row(agent_name=agent_name), sort_keys=True) + "\n")


def main(argv: list[str] | None = None) -> int:
    """``python -m agentrl.swe.task IN.(jsonl|parquet) OUT.jsonl``: SWE-bench rows as training rows (`to_row`)."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(description="Turn SWE-bench/SWE-Gym/SWE-smith rows into agentrl dataset rows.")
    parser.add_argument("source", type=Path, help="SWE-bench-format rows (JSONL or Parquet)")
    parser.add_argument("dest", type=Path, help="the JSONL file to write (data.train_files / data.eval_files)")
    args = parser.parse_args(argv)
    try:
        tasks = load_tasks(args.source)
    except TaskError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    write_rows(tasks, args.dest)
    print(f"{len(tasks)} tasks written to {args.dest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
