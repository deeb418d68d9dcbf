"""The agent harnesses agentrl runs unchanged inside a task's container: where each one's files come from (its
npm registry package, pinned), where they go, and how it is started against a gateway session."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

MOUNT_ROOT = "/opt/agentrl/harness"
"""Where a harness's files appear in a container (read-only)."""
HOME = "/work/.agentrl/home"
"""The harness's home in the container (writable, outside the task's repository, so never in its diff)."""


@dataclass(frozen=True)
class Launch:
    """What a harness is started with, for one session."""

    prompt: str
    model: str
    base_url: str
    """The session's URL on the container's loopback, ending in `/v1`."""
    args: tuple[str, ...] = ()
    """The user's extra command-line arguments (`agent.kwargs.harness_args`)."""


@dataclass(frozen=True)
class Harness:
    """A harness: an npm package that ships a native binary, and how to run it against a gateway session.

    Attributes:
        name: the harness's name in configs (`agent.kwargs.harness`).
        package: the npm package holding the binary for linux x64, pinned (`name@version`).
        executable: the binary's path inside the package.
        command: its command line for a launch (the binary first).
        env: its environment for a launch.
        api: the API it speaks (`messages` or `responses`), for the docs and the checks.
    """

    name: str
    package: str
    executable: str
    command: Callable[[Harness, Launch], list[str]]
    env: Callable[[Harness, Launch], dict[str, str]]
    api: str
    setup: Callable[[Harness, Launch], dict[str, str]] = field(default=lambda h, launch: {})
    """Files (path -> text) written in the container before it starts (its configuration)."""

    @property
    def version(self) -> str:
        return self.package.rpartition("@")[2]

    @property
    def tag(self) -> str:
        """The harness image (`agentrl/harness-<name>:<version>`)."""
        return f"agentrl/harness-{self.name.replace('_', '-')}:{self.version}"

    @property
    def volume(self) -> str:
        """The volume its image's files are served to containers from."""
        return f"agentrl-harness-{self.name.replace('_', '-')}-{self.version}"

    @property
    def home(self) -> str:
        """Its folder in a container."""
        return f"{MOUNT_ROOT}/{self.name}"

    @property
    def binary(self) -> str:
        """Its binary's path in a container."""
        return f"{self.home}/{self.executable}"
