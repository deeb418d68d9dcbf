"""The SWE task format: one instance = a repository at a commit, an issue, a gold patch and its tests.

Rows of SWE-bench (full, Lite, Verified, Multimodal), SWE-Gym, SWE-smith and R2E-Gym load unchanged: each
format's columns are mapped onto these fields (`agentrl.swe.formats`); `FAIL_TO_PASS` may be a list or a JSON
string of one. Fields agentrl adds are optional:

| field | meaning |
|---|---|
| `instance_id`, `repo`, `base_commit` | the task, the repository (`owner/name`), the commit the agent starts from |
| `problem_statement` | the issue text the agent sees |
| `patch` / `test_patch` | the gold fix / the tests that check it (applied only when grading) |
| `FAIL_TO_PASS` / `PASS_TO_PASS` | test ids that must go from failing to passing / keep passing |
| `image_name` | the Docker image holding the repository at `repo_dir` (each dataset's naming is derived otherwise) |
| `repo_dir` | where the repository is in the image (default `/testbed`, SWE-bench's) |
| `env_setup` | shell lines run before the tests (e.g. activating a conda env) |
| `start_patch` | a diff applied and committed before the agent starts (SWE-smith's bug) |
| `grader` | `swebench` (the official package's test command, log parser, grading) or `pytest` (agentrl's JUnit run) |
| `row_format` | the dataset the row was read from (`swe-bench`, `swe-gym`, `swe-smith`, `r2e-gym`); None: agentrl's |
| `image_build` | how agentrl's own task images are built (see `agentrl.swe.images`) |
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agentrl.swe.errors import TaskError
from agentrl.swe.formats import SWEBENCH_ENV_SETUP
from agentrl.types import Message, Sample

DEFAULT_REPO_DIR = "/testbed"
GRADERS = ("swebench", "pytest")
"""How a task's patch is graded: by the official swebench package, or by agentrl's pytest + JUnit run."""


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
    start_patch: str = ""
    grader: str | None = None
    row_format: str | None = None
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

    @field_validator("grader")
    @classmethod
    def _known_grader(cls, value: str | None) -> str | None:
        if value is not None and value not in GRADERS:
            raise ValueError(f"unknown grader {value!r}; use one of {', '.join(GRADERS)}")
        return value

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
        from swebench.task.checks import expected_image

        return expected_image(self.instance_id)

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
    def from_row(cls, row: dict[str, Any], where: str = "row", row_format: str | None = None) -> SWETask:
        """Validate one dataset row, in any format of `agentrl.swe.formats` (named, or told by its columns).

        Raises:
            TaskError: a required field is missing or malformed (all problems listed).
        """
        from agentrl.swe.formats import normalize

        row = normalize(row, row_format, where)
        try:
            return cls.model_validate(row)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(row)'}: {e['msg']}" for e in exc.errors())
            raise TaskError(f"{where} is not a SWE-bench task: {problems}") from None

    @classmethod
    def from_sample(cls, sample: Sample) -> SWETask:
        """The task a `Sample` carries: its `extra_info` holds the task's columns (as `agentrl.data` loads
        them), or a nested `extra_info["swe"]`; a missing problem statement falls back to the prompt's text. A
        data source naming a dataset (`SWE-Gym/SWE-Gym`) names the row format.

        Raises:
            TaskError: the sample is not a SWE task, saying which fields are missing.
        """
        from agentrl.swe.formats import format_of_source

        info = dict(sample.extra_info.get("swe") or sample.extra_info)
        if "instance_id" not in info and sample.id:
            info["instance_id"] = sample.id
        if not info.get("problem_statement"):
            users = [m.content for m in sample.prompt if m.role == "user" and isinstance(m.content, str)]
            info["problem_statement"] = "\n\n".join(users)
        fmt = None if "row_format" in info else format_of_source(sample.data_source)
        return cls.from_row(info, where=f"sample {sample.id or ''}".strip(), row_format=fmt)

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


def load_tasks(path: str | Path, row_format: str | None = None) -> list[SWETask]:
    """Every task of a `.jsonl`/`.json` or `.parquet` file of rows, loaded unchanged.

    Args:
        path: the file.
        row_format: the dataset its rows come from (`swe-bench`, `swe-gym`, `swe-smith`, `r2e-gym`); None: told
            by each row's columns (SWE-Gym rows, shaped like SWE-bench's, must be named).

    Raises:
        TaskError: the file is missing or a row is not a task (file, row and missing column named).
    """
    path = Path(path)
    if not path.is_file():
        raise TaskError(f"task file {path} does not exist")
    return [SWETask.from_row(row, f"{path}, row {i}", row_format) for i, row in enumerate(_rows(path))]


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
    """``python -m agentrl.swe.task IN.(jsonl|parquet) OUT.jsonl [--format F]``: rows as training rows (`to_row`)."""
    import argparse
    import sys

    from agentrl.swe.formats import FORMATS

    parser = argparse.ArgumentParser(description="Turn SWE-bench/SWE-Gym/SWE-smith/R2E-Gym rows into agentrl rows.")
    parser.add_argument("source", type=Path, help="the dataset's rows (JSONL or Parquet)")
    parser.add_argument("dest", type=Path, help="the JSONL file to write (data.train_files / data.eval_files)")
    parser.add_argument("--format", choices=list(FORMATS), help="the dataset (default: told by the columns)")
    args = parser.parse_args(argv)
    try:
        tasks = load_tasks(args.source, args.format)
    except TaskError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    write_rows(tasks, args.dest)
    print(f"{len(tasks)} tasks written to {args.dest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
