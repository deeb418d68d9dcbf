"""`task.toml`: the fields of Harbor's task configuration that agentrl reads, as Harbor 0.26 defines them.

agentrl cannot import `harbor` (its models live in `harbor.models.task.config`): it needs Python 3.12+, and
agentrl runs on 3.11. With the package installed beside agentrl (`agentrl.harbor.package`), Harbor's own models
read task.toml and their dump is validated here; without it, agentrl reads task.toml itself with these models
(`data.harbor_reader=agentrl`, or `auto` where the package is missing). They mirror the fields we use, with
Harbor's defaults and its migrations of deprecated fields (`memory = "2G"` → `memory_mb`, `storage` →
`storage_mb`, `allow_internet` → `network_mode`, `version` → `schema_version`); every other key is ignored, as
Harbor's own models ignore unknown keys.

```toml
schema_version = "1.4"
[task]                      # optional: the package name, "org/name"
name = "agentrl/hello-file"
[metadata]                  # free-form: difficulty, category, tags, ...
[verifier]
timeout_sec = 600.0         # limit of tests/test.sh
env = {}                    # environment of tests/test.sh (${VAR} and ${VAR:-default} read from the host)
[agent]
timeout_sec = 600.0         # the agent's wall-clock budget
[environment]
build_timeout_sec = 600.0   # limit of building environment/Dockerfile
docker_image = "..."        # a prebuilt image instead of environment/Dockerfile
cpus = 1
memory_mb = 2048
storage_mb = 10240
network_mode = "public"     # or "no-network", "allowlist" (+ allowed_hosts)
workdir = "/app"            # overrides the image's WORKDIR
[solution]
env = {}                    # environment of solution/solve.sh
```
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

NetworkMode = Literal["no-network", "public", "allowlist"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class PackageInfo(_Section):
    """`[task]`: the task's package name in Harbor's registry."""

    name: str = Field(description="package name, 'org/name'")
    version: str | None = Field(None, description="package version")
    description: str = Field("", description="what the task is")


class AgentSection(_Section):
    """`[agent]`."""

    timeout_sec: float | None = Field(None, gt=0, description="the agent's wall-clock budget")
    user: str | int | None = Field(None, description="user the agent runs as (None: the image's)")


class VerifierSection(_Section):
    """`[verifier]`."""

    timeout_sec: float = Field(600.0, gt=0, description="limit of tests/test.sh")
    env: dict[str, str] = Field(default_factory=dict, description="environment of tests/test.sh")
    user: str | int | None = Field(None, description="user the verifier runs as (None: the image's)")
    environment_mode: Literal["shared", "separate"] | None = Field(None, description="where tests/test.sh runs")
    environment: dict[str, Any] | None = Field(None, description="a separate verifier environment")


class EnvironmentSection(_Section):
    """`[environment]`."""

    build_timeout_sec: float = Field(600.0, gt=0, description="limit of building environment/Dockerfile")
    docker_image: str | None = Field(None, description="a prebuilt image; environment/Dockerfile is then optional")
    os: Literal["linux", "windows"] = Field("linux", description="the container's operating system")
    cpus: float | None = Field(None, gt=0, description="CPU limit")
    memory_mb: int | None = Field(None, gt=0, description="memory limit in MB")
    storage_mb: int | None = Field(None, gt=0, description="disk limit in MB")
    gpus: int | None = Field(None, ge=0, description="GPUs the task needs")
    network_mode: NetworkMode = Field("public", description="network access of the agent and the verifier")
    allowed_hosts: list[str] | None = Field(None, description="hosts reachable with network_mode='allowlist'")
    workdir: str | None = Field(None, description="working folder of commands (None: the image's WORKDIR)")

    @model_validator(mode="before")
    @classmethod
    def _migrate(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for old, new in (("memory", "memory_mb"), ("storage", "storage_mb")):
            if isinstance(data.get(old), str):
                data.setdefault(new, size_to_mb(data.pop(old)))
        allow = data.pop("allow_internet", None)
        if allow is not None and "network_mode" not in data and data.get("allowed_hosts") is None:
            data["network_mode"] = "public" if allow else "no-network"
        if isinstance(data.get("os"), str):
            data["os"] = data["os"].lower()
        return data


class SolutionSection(_Section):
    """`[solution]`."""

    env: dict[str, str] = Field(default_factory=dict, description="environment of solution/solve.sh")


class TaskConfig(_Section):
    """A whole `task.toml`."""

    schema_version: str = "1.4"
    task: PackageInfo | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    verifier: VerifierSection = Field(default_factory=VerifierSection)
    agent: AgentSection = Field(default_factory=AgentSection)
    environment: EnvironmentSection = Field(default_factory=EnvironmentSection)
    solution: SolutionSection = Field(default_factory=SolutionSection)
    steps: list[dict[str, Any]] | None = Field(None, description="multi-step tasks (not supported here)")

    @model_validator(mode="before")
    @classmethod
    def _rename_version(cls, data: Any) -> Any:
        if isinstance(data, dict) and "version" in data:
            data = dict(data)
            data.setdefault("schema_version", data.pop("version"))
        return data

    def unsupported(self) -> list[str]:
        """What this task asks for that agentrl cannot give it (each with the field to change)."""
        problems = []
        if self.steps:
            problems.append("[[steps]]: multi-step tasks are not supported; give a single-step task")
        if self.environment.os != "linux":
            problems.append(f"[environment].os = {self.environment.os!r}: only Linux containers are supported")
        if self.environment.gpus:
            problems.append(f"[environment].gpus = {self.environment.gpus}: task sandboxes have no GPUs")
        if self.verifier.environment_mode == "separate" or self.verifier.environment is not None:
            problems.append(
                "[verifier]: a separate verifier environment is not supported; agentrl runs tests/test.sh in the "
                "agent's container (environment_mode = 'shared')"
            )
        return problems


def size_to_mb(size: str) -> int:
    """Harbor's size strings ("2G", "512M", "1024K") in MB.

    Raises:
        ValueError: not a number followed by G, M or K.
    """
    text = size.strip().upper()
    factors = {"G": 1024.0, "M": 1.0, "K": 1 / 1024}
    if not text or text[-1] not in factors:
        raise ValueError(f"invalid size {size!r}; expected a form like '1G' or '512M'")
    return int(float(text[:-1]) * factors[text[-1]])
