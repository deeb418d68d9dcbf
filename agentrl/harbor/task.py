"""One Harbor task folder, as Harbor lays it out:

```
hello-file/
├── instruction.md          the prompt
├── task.toml               timeouts, resources, network (`agentrl.harbor.config`)
├── environment/Dockerfile  the agent's container (or [environment].docker_image)
├── solution/solve.sh       the reference solution (copied to /solution by the oracle)
└── tests/test.sh           the verifier: copied to /tests after the agent finished; writes
                            /logs/verifier/reward.txt (a number) or /logs/verifier/reward.json ({"name": number})
```
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from agentrl.errors import UserError
from agentrl.harbor.config import TaskConfig
from agentrl.harbor.package import read_tasks
from agentrl.types import Message, Sample

AGENT_NAME = "harbor_agent"
_CANARY = re.compile(r"^(<!--.*canary.*-->|#.*canary.*)$", re.IGNORECASE)


class HarborTaskError(UserError):
    """A Harbor task folder or dataset is unusable; the message names the file and the field."""


class HarborTask(BaseModel):
    """A loaded task folder (frozen).

    Attributes:
        path: the task folder (absolute).
        name: `[task].name`, else the folder's name.
        instruction: instruction.md, canary lines at its top removed (as Harbor shows it to agents).
        config: task.toml.
        reader: what read the folder: Harbor's package (`harbor`) or agentrl's own reader (`agentrl`); the
            verifier's reward files are then read by the same (`agentrl.harbor.package`).
    """

    model_config = ConfigDict(frozen=True)

    path: Path
    name: str
    instruction: str
    config: TaskConfig
    reader: Literal["harbor", "agentrl"] = "agentrl"

    @property
    def environment_dir(self) -> Path:
        return self.path / "environment"

    @property
    def dockerfile(self) -> Path:
        return self.environment_dir / "Dockerfile"

    @property
    def tests_dir(self) -> Path:
        return self.path / "tests"

    @property
    def solution_dir(self) -> Path:
        return self.path / "solution"

    def to_sample(self, agent_name: str = AGENT_NAME) -> Sample:
        """The task as a dataset row: the instruction is the prompt; the folder travels in `extra_info`."""
        return Sample(
            id=self.name,
            agent_name=agent_name,
            data_source=f"harbor/{self.name}",
            prompt=[Message(role="user", content=self.instruction)],
            extra_info={"harbor": {"task_dir": str(self.path), "name": self.name, "reader": self.reader}},
        )

    @classmethod
    def from_sample(cls, sample: Sample) -> HarborTask:
        """The task a sample made by `to_sample` (or `agentrl.data` from a task folder) names.

        Raises:
            HarborTaskError: the sample names no task folder, or the folder is no longer a valid task.
        """
        info = sample.extra_info.get("harbor")
        if not isinstance(info, dict) or not info.get("task_dir"):
            raise HarborTaskError(
                f"sample {sample.id or ''} names no Harbor task (extra_info.harbor.task_dir); load Harbor tasks with "
                "data.train_files=[path/to/tasks/] (a task folder, a folder of them, or a dataset.toml)"
            )
        return load_task(info["task_dir"], info.get("reader", "agentrl"))


def load_task(path: str | Path, reader: Literal["harbor", "agentrl"] = "agentrl") -> HarborTask:
    """Read a task folder, with Harbor's package (`reader="harbor"`) or agentrl's own reader.

    Raises:
        HarborTaskError: a file is missing or task.toml is invalid or asks for what agentrl cannot give (every
            problem of the folder listed, each with the file or field; Harbor's own message with its reader).
        HarborPackageError: `harbor` is asked for and no interpreter has it.
    """
    path = Path(path).resolve()
    if not path.is_dir():
        raise HarborTaskError(f"Harbor task {path} is not a folder")
    if reader == "harbor":
        return _read_with_harbor(path)
    problems = task_problems(path)
    if problems:
        raise HarborTaskError(f"Harbor task {path}:\n  " + "\n  ".join(problems))
    config = read_config(path / "task.toml")
    name = config.task.name if config.task is not None else path.name
    instruction = strip_canary((path / "instruction.md").read_text())
    return HarborTask(path=path, name=name, instruction=instruction, config=config)


def _read_with_harbor(path: Path) -> HarborTask:
    """The folder as Harbor's `Task` reads it; then what agentrl cannot give it is refused as with its own
    reader (Harbor runs more kinds of task than agentrl's containers do)."""
    (answer,) = read_tasks([path])
    if "error" in answer:
        raise HarborTaskError(f"Harbor task {path}: harbor refused it: {answer['error']}")
    config = TaskConfig.model_validate(answer["config"])
    problems = config.unsupported() + _missing_tests(path)
    if problems:
        raise HarborTaskError(f"Harbor task {path}:\n  " + "\n  ".join(problems))
    return HarborTask(path=path, name=answer["name"], instruction=answer["instruction"], config=config, reader="harbor")


def task_problems(path: Path) -> list[str]:
    """Every problem of a task folder (empty when it loads)."""
    toml = path / "task.toml"
    if not toml.is_file():
        return [f"task.toml is missing; {_LAYOUT}"]
    try:
        config = read_config(toml)
    except HarborTaskError as exc:
        return [str(exc)]
    problems = config.unsupported()
    if not (path / "instruction.md").is_file():
        problems.append("instruction.md is missing: it holds the task's prompt")
    if config.environment.docker_image is None and not (path / "environment" / "Dockerfile").is_file():
        problems.append("environment/Dockerfile is missing (or set [environment].docker_image in task.toml)")
    return problems + _missing_tests(path)


def _missing_tests(path: Path) -> list[str]:
    if (path / "tests" / "test.sh").is_file():
        return []
    return ["tests/test.sh is missing: the verifier that writes /logs/verifier/reward.txt"]


def read_config(toml: Path) -> TaskConfig:
    """Parse and validate a task.toml.

    Raises:
        HarborTaskError: not valid TOML, or a field with a bad value (each field named as `[section].key`).
    """
    try:
        data: dict[str, Any] = tomllib.loads(toml.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise HarborTaskError(f"task.toml is not valid TOML: {exc}") from None
    try:
        return TaskConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{_field(e['loc'])}: {e['msg']}" for e in exc.errors())
        raise HarborTaskError(f"task.toml: {problems}") from None


def strip_canary(text: str) -> str:
    """`text` without the canary lines (data-provenance markers) and blank lines at its top."""
    lines = text.split("\n")
    i = 0
    while i < len(lines) and _CANARY.match(lines[i].strip()):
        i += 1
    while i < len(lines) and not lines[i].strip():
        i += 1
    return "\n".join(lines[i:])


def _field(loc: tuple[Any, ...]) -> str:
    if not loc:
        return "(file)"
    head = f"[{loc[0]}]" if loc[0] in TaskConfig.model_fields and loc[0] != "schema_version" else str(loc[0])
    return head + "".join(f".{part}" for part in loc[1:])


_LAYOUT = "a Harbor task folder holds instruction.md, task.toml, environment/Dockerfile and tests/test.sh"
