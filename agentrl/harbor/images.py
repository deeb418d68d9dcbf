"""A task's image: its `environment/Dockerfile` built offline, tagged by content like recipe images.

The tag is `agentrl/harbor-<task>:<hash12>`, the hash covering the build context (every file's path, mode and
bytes) and the ids of the images it builds `FROM`: an unchanged task on unchanged bases reuses its image, an
edited one gets a new tag. Nothing is pulled and `RUN` steps have no network, so every `FROM` image must exist in
the local engine (e.g. `FROM agentrl/sandbox:base`, which `agentrl sandbox build` makes); a missing one fails
before the build, naming it. A task with `[environment].docker_image` uses that image as it is (it must exist).
Harbor's package builds through docker compose and may pull; this builder is agentrl's so that nothing is.

    python -m agentrl.harbor.images recipes/harbor/tasks      # build every task's image
"""

from __future__ import annotations

import argparse
import re
import sys
import threading
from pathlib import Path
from typing import Any

from agentrl.errors import UserError
from agentrl.harbor.dataset import load_tasks
from agentrl.harbor.task import HarborTask
from agentrl.sandbox.images import BASE_IMAGE, ImageBuildError, _client, image_exists
from agentrl.sandbox.recipe_images import HASH_LEN, context_hash, docker_build

TAG_PREFIX = "agentrl/harbor-"
_ARG = re.compile(r"^ARG\s+([A-Za-z_][A-Za-z0-9_]*)(?:=(\S*))?", re.IGNORECASE)
_FROM = re.compile(r"^FROM\s+(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?", re.IGNORECASE)
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")
_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


class HarborImageError(ImageBuildError):
    """A task's image cannot be had; the message names the task and what to do."""


def base_images(dockerfile: str, buildargs: dict[str, str] | None = None) -> list[str]:
    """The images a Dockerfile builds `FROM` (build args and `ARG` defaults filled in; `scratch` and earlier
    stages left out), in order."""
    args = dict(buildargs or {})
    stages: set[str] = set()
    bases: list[str] = []
    for line in _instructions(dockerfile):
        if (arg := _ARG.match(line)) and not bases and arg.group(2) is not None:
            args.setdefault(arg.group(1), arg.group(2).strip("\"'"))
        elif source := _FROM.match(line):
            image = _VAR.sub(lambda m: args.get(m.group(1) or m.group(3), m.group(2) or ""), source.group(1))
            if image.lower() != "scratch" and image not in stages and image not in bases:
                bases.append(image)
            if source.group(2):
                stages.add(source.group(2))
    return bases


def task_image(task: HarborTask, client: Any = None, force: bool = False) -> str:
    """The tag of the task's image, built first when missing (blocking; concurrent calls build once).

    Raises:
        HarborImageError: `docker_image` or a `FROM` image is missing locally, or the build failed (its log's end).
    """
    client = client or _client()
    prebuilt = task.config.environment.docker_image
    if prebuilt is not None:
        if not image_exists(prebuilt, client):
            raise HarborImageError(
                f"task {task.name}: [environment].docker_image {prebuilt} is not in the local Docker engine and "
                "nothing is pulled (no registry is reachable): `docker load` or build it first"
            )
        return prebuilt
    text = task.dockerfile.read_text()
    buildargs = {"BASE_IMAGE": BASE_IMAGE} if "BASE_IMAGE" in text else {}
    bases = base_images(text, buildargs)
    missing = [b for b in bases if not image_exists(b, client)]
    if missing:
        raise HarborImageError(
            f"task {task.name}: environment/Dockerfile builds FROM {', '.join(missing)}, which the local Docker "
            f"engine does not have, and nothing is pulled (no registry is reachable): build or `docker load` it "
            f"first, or build the task on {BASE_IMAGE} (`agentrl sandbox build` makes it)"
        )
    digest = context_hash(task.environment_dir, ",".join(client.images.get(b).id for b in bases))
    tag = f"{repository(task.name)}:{digest[:HASH_LEN]}"
    with _lock(tag):
        if force or not image_exists(tag, client):
            labels = {"agentrl.harbor_task": task.name, "agentrl.context_hash": digest}
            docker_build(client, task.environment_dir, tag, buildargs=buildargs, labels=labels, force=force,
                         timeout_s=task.config.environment.build_timeout_sec)  # fmt: skip
    return tag


def image_workdir(client: Any, image: str) -> str:
    """The image's WORKDIR (`/` when it sets none)."""
    return client.images.get(image).attrs.get("Config", {}).get("WorkingDir") or "/"


def repository(name: str) -> str:
    """The image repository of task `name` ("org/task" → `agentrl/harbor-org-task`)."""
    clean = re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("._-") or "task"
    return f"{TAG_PREFIX}{clean}"


def _instructions(dockerfile: str) -> list[str]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    out, pending = [], ""
    for raw in dockerfile.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        out.append(pending + line)
        pending = ""
    return out + ([pending] if pending else [])


def _lock(tag: str) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(tag, threading.Lock())


def main(argv: list[str] | None = None) -> int:
    """Command line: ``python -m agentrl.harbor.images TASKS [--force]``."""
    parser = argparse.ArgumentParser(description="Build the images of Harbor tasks (offline).")
    parser.add_argument("tasks", type=Path, help="a task folder, a folder of them, or a dataset.toml")
    parser.add_argument("--force", action="store_true", help="rebuild even when the images exist")
    args = parser.parse_args(argv)
    try:
        for task in load_tasks(args.tasks):
            print(f"{task.name}: {task_image(task, force=args.force)}")
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
