"""Offline images of agentrl's own SWE tasks, rebuilt from the task file and the packages it names.

A task built from a PyPI sdist carries `image_build`:

```json
{"sdist": "toolz==1.0.0", "sha256": "…", "python_path": ["."], "test_requirements": ["pytest==9.2.0", …]}
```

and its image is made in two layers on `agentrl/sandbox:base`, with nothing fetched inside Docker:

1. a test environment shared by every task with the same `test_requirements`: their wheels, downloaded on the
   host with pip and unpacked into `/opt/swe/deps`;
2. per task, the repository at `/testbed` in its *base* state — the sdist with the gold `patch` and the
   `test_patch` reversed — committed once, so that nothing in the image shows the fix or the hidden tests.

The image is tagged `image_name`. Downloads are cached in `~/.cache/agentrl/swe` ($AGENTRL_SWE_CACHE); an
unchanged task on an unchanged base image is not rebuilt, so a second run takes seconds:

    python -m agentrl.swe.images recipes/swe_agent/data/tasks.jsonl

The images of published datasets (SWE-bench, SWE-Gym, SWE-smith, R2E-Gym) are not built here: they are pulled,
only when asked (`--pull`, on a machine that reaches their registry), and listed with how to get them otherwise:

    python -m agentrl.swe.images swe_gym.parquet --format swe-gym --pull
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from agentrl.sandbox.images import BASE_IMAGE, ImageBuildError, image_exists
from agentrl.swe.task import SWETask, load_tasks

GIT_DATE = "2000-01-01T00:00:00+0000"
COMMIT_MESSAGE = "base"
TASK_DOCKERFILE = """\
ARG BASE_IMAGE
FROM ${{BASE_IMAGE}}
COPY testbed/ /testbed/
RUN cd /testbed && {commit} && chown -R 1000:1000 /testbed
ENV PYTHONPATH={python_path} PYTHONDONTWRITEBYTECODE=1
"""
ENV_DOCKERFILE = """\
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
COPY deps/ /opt/swe/deps/
ENV PYTHONPATH=/opt/swe/deps PYTHONDONTWRITEBYTECODE=1
"""


def cache_dir() -> Path:
    """Where sdists and wheels are kept between builds."""
    return Path(os.environ.get("AGENTRL_SWE_CACHE", Path.home() / ".cache" / "agentrl" / "swe"))


def _log(msg: str) -> None:
    print(f"[agentrl swe] {msg}", file=sys.stderr, flush=True)


def commit_command(identity: str = "-c user.name=agentrl -c user.email=agentrl@localhost") -> str:
    """The shell command committing a folder's files as the task's base commit (fixed author and dates, so the
    same tree gives the same sha on the host and in the image)."""
    dates = f"GIT_AUTHOR_DATE={GIT_DATE} GIT_COMMITTER_DATE={GIT_DATE}"
    return (
        f"git init -q && git add -A && {dates} git {identity} -c commit.gpgsign=false "
        f"commit -q --no-verify -m {COMMIT_MESSAGE}"
    )


def base_commit_of(tree: Path) -> str:
    """The sha `commit_command` gives the files of `tree` (computed on a throwaway copy)."""
    with tempfile.TemporaryDirectory(prefix="agentrl-swe-") as tmp:
        copy = Path(tmp) / "repo"
        shutil.copytree(tree, copy, symlinks=True)
        env = {**os.environ, "HOME": tmp, "GIT_CONFIG_NOSYSTEM": "1"}
        subprocess.run(["bash", "-c", commit_command()], cwd=copy, env=env, check=True, capture_output=True)
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=copy, env=env, check=True, capture_output=True)
        return out.stdout.decode().strip()


# ---- downloads ---------------------------------------------------------------------------------------------


def pip_download(args: list[str], dest: Path) -> None:
    """`pip download ARGS -d DEST` with this interpreter's pip.

    Raises:
        ImageBuildError: pip failed (with its output).
    """
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "-q", "-d", str(dest), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ImageBuildError(f"pip download {' '.join(args)} failed; is the package index reachable?\n{proc.stderr}")


def fetch_sdist(requirement: str, sha256: str | None = None) -> Path:
    """The sdist of `name==version` from the cache, downloaded first when missing; checked against `sha256`."""
    name, _, version = requirement.partition("==")
    folder = cache_dir() / "sdists"
    found = _find_sdist(folder, name, version)
    if found is None:
        _log(f"downloading the sdist of {requirement}")
        pip_download(["--no-deps", "--no-binary", ":all:", requirement], folder)
        found = _find_sdist(folder, name, version)
    if found is None:
        raise ImageBuildError(f"pip downloaded no sdist of {requirement} into {folder}")
    if sha256 and hashlib.sha256(found.read_bytes()).hexdigest() != sha256:
        raise ImageBuildError(f"{found} does not match the sha256 of the task file; delete it and retry")
    return found


def _find_sdist(folder: Path, name: str, version: str) -> Path | None:
    norm = name.lower().replace("-", "_")
    for path in sorted(folder.glob("*.tar.gz")) if folder.is_dir() else []:
        stem = path.name[: -len(".tar.gz")].lower().replace("-", "_")
        if stem == f"{norm}_{version}".lower():
            return path
    return None


def unpack_sdist(sdist: Path, dest: Path) -> Path:
    """Extract an sdist into `dest` (its top folder stripped); returns `dest`."""
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if "/" in m.name and (m.isfile() or m.isdir() or m.issym())]
        for m in members:
            m.name = m.name.split("/", 1)[1]
        tar.extractall(dest, members=members, filter="data")
    return dest


def fetch_wheels(requirements: list[str]) -> Path:
    """A folder with the unpacked wheels of `requirements` and their dependencies (for Python 3.11)."""
    key = hashlib.sha256("\n".join(sorted(requirements)).encode()).hexdigest()[:12]
    folder = cache_dir() / "wheels" / key
    if not (folder / ".complete").is_file():
        _log(f"downloading wheels: {' '.join(requirements)}")
        pip_download(["--only-binary", ":all:", "--python-version", "3.11", *requirements], folder)
        (folder / ".complete").write_text("\n".join(requirements))
    return folder


# ---- build contexts ----------------------------------------------------------------------------------------


def base_tree(task: SWETask, dest: Path) -> Path:
    """The task's repository in its base state: the sdist with `patch` and `test_patch` reversed.

    Raises:
        ImageBuildError: the task has no `image_build.sdist`, or a patch does not reverse cleanly.
    """
    spec = task.image_build or {}
    if not spec.get("sdist"):
        raise ImageBuildError(f"task {task.instance_id} has no image_build.sdist; its image cannot be built here")
    unpack_sdist(fetch_sdist(spec["sdist"], spec.get("sha256")), dest)
    for name, patch in (("test_patch", task.test_patch), ("patch", task.patch)):
        if patch.strip():
            proc = subprocess.run(["git", "apply", "-R", "-"], input=patch.encode(), cwd=dest, capture_output=True)
            if proc.returncode != 0:
                raise ImageBuildError(f"{task.instance_id}: its {name} does not reverse on the sdist: "
                                      f"{proc.stderr.decode()[-500:]}")  # fmt: skip
    return dest


def task_context(task: SWETask, dest: Path) -> Path:
    """Write the build context of the task's image into `dest`."""
    base_tree(task, dest / "testbed")
    paths = [f"/work/testbed/{p}".rstrip("/.") for p in (task.image_build or {}).get("python_path", ["."])]
    python_path = ":".join([*paths, "/opt/swe/deps"])
    (dest / "Dockerfile").write_text(TASK_DOCKERFILE.format(commit=commit_command(), python_path=python_path))
    return dest


def env_context(requirements: list[str], dest: Path) -> Path:
    """Write the build context of the test environment (the wheels of `requirements`, unpacked) into `dest`."""
    deps = dest / "deps"
    deps.mkdir(parents=True, exist_ok=True)
    for wheel in sorted(fetch_wheels(requirements).glob("*.whl")):
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(deps)
    (dest / "Dockerfile").write_text(ENV_DOCKERFILE)
    return dest


# ---- building ----------------------------------------------------------------------------------------------


def build_task_images(tasks: list[SWETask], base: str = BASE_IMAGE, force: bool = False, client: Any = None) -> dict:
    """Build (or reuse) the image of every task with an `image_build`; returns {instance_id: image tag}.

    Raises:
        ImageBuildError: a download, a patch or a build failed (the message says which and why).
    """
    from agentrl.sandbox.images import _client
    from agentrl.sandbox.recipe_images import build_recipe_image

    client = client or _client()
    envs: dict[tuple[str, ...], str] = {}
    built: dict[str, str] = {}
    for task in tasks:
        spec = task.image_build or {}
        if not spec.get("sdist"):
            continue
        reqs = tuple(spec.get("test_requirements") or ["pytest"])
        with tempfile.TemporaryDirectory(prefix="agentrl-swe-ctx-") as tmp:
            if reqs not in envs:
                envs[reqs] = build_recipe_image(env_context(list(reqs), Path(tmp) / "env"), "swe-env", base=base,
                                                force=force, client=client)  # fmt: skip
            context = task_context(task, Path(tmp) / "task")
            tag = build_recipe_image(context, f"swe-{task.instance_id}", base=envs[reqs], force=force, client=client)
        client.images.get(tag).tag(*_split_tag(task.image))
        built[task.instance_id] = task.image
    return built


def how_to_get(task: SWETask) -> str:
    """What to do about the task's missing image: build it (agentrl's tasks) or pull it (a dataset's)."""
    if (task.image_build or {}).get("sdist"):
        return "build it: python -m agentrl.swe.images TASKS.jsonl (scripts/setup.sh builds the bundled tasks')"
    hint = (
        f"pull it where a registry can be reached (docker pull {task.image}, or python -m agentrl.swe.images "
        "--pull TASKS.jsonl) and, on a machine without one, bring it over with docker save / docker load"
    )
    if task.row_format == "swe-bench":
        hint += f"; or build it with swebench's image builder (swebench images build TASK_REPO -i {task.instance_id})"
    return hint


def pull_task_images(tasks: list[SWETask], client: Any = None) -> list[str]:
    """Pull the images of tasks that are not built here (no `image_build`) and are missing; returns those pulled.

    Raises:
        ImageBuildError: a pull failed (no registry reachable, no such image), with what to do instead.
    """
    import docker

    from agentrl.sandbox.images import _client

    client = client or _client()
    pulled: list[str] = []
    for image in dict.fromkeys(t.image for t in tasks if not (t.image_build or {}).get("sdist")):
        if image_exists(image, client):
            continue
        _log(f"pulling {image}")
        try:
            client.images.pull(*_split_tag(image))
        except docker.errors.DockerException as exc:
            raise ImageBuildError(
                f"cannot pull {image}: {exc}; pull it on a machine that reaches its registry and docker load it here"
            ) from exc
        pulled.append(image)
    return pulled


def missing_images(tasks: list[SWETask], client: Any = None) -> list[SWETask]:
    """The tasks (one per image) whose image is not in the local engine."""
    from agentrl.sandbox.images import _client

    client = client or _client()
    firsts = {t.image: t for t in reversed(tasks)}
    return [t for image, t in reversed(firsts.items()) if not image_exists(image, client)]


def _split_tag(image: str) -> tuple[str, str]:
    repository, sep, tag = image.rpartition(":")
    if not sep or "/" in tag:
        return image, "latest"
    return repository, tag


def main(argv: list[str] | None = None) -> int:
    """Command line: ``python -m agentrl.swe.images TASKS.jsonl... [--force] [--pull] [--format F]``."""
    from agentrl.swe.formats import FORMATS
    from agentrl.swe.task import TaskError

    parser = argparse.ArgumentParser(description="Build the Docker images of SWE tasks made from PyPI sdists, and "
                                     "pull those of published datasets when asked.")  # fmt: skip
    parser.add_argument("tasks", type=Path, nargs="+", help="task files (JSONL or Parquet)")
    parser.add_argument("--force", action="store_true", help="rebuild even when the images exist")
    parser.add_argument("--pull", action="store_true", help="pull the missing images of dataset tasks (registry)")
    parser.add_argument("--format", choices=list(FORMATS), help="the dataset of the rows (default: their columns)")
    args = parser.parse_args(argv)
    try:
        tasks = [t for path in args.tasks for t in load_tasks(path, args.format)]
        built = build_task_images(tasks, force=args.force)
        pulled = pull_task_images(tasks) if args.pull else []
        missing = missing_images(tasks)
    except (ImageBuildError, TaskError, OSError) as exc:
        _log(f"error: {exc}")
        return 1
    _log(f"{len(built)} task images built, {len(pulled)} pulled")
    for task in missing:
        _log(f"missing: {task.image} ({task.instance_id}): {how_to_get(task)}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
