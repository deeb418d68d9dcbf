"""Recipe images: `docker build` of a recipe's local build context on top of the sandbox base image, offline.

A recipe that needs more than the base image (a repository checked out, packages copied in, files prepared)
ships a build context — a folder with a ``Dockerfile`` that builds on the base image, never on a registry:

```dockerfile
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
COPY repo/ /opt/repo/
```

```python
tag = build_recipe_image(Path("recipes/swe_agent/image"), "swe_agent")  # agentrl/recipe-swe_agent:1f2e3d4c5b6a
sandbox = await DockerSandbox.create(tag)
```

The tag carries a hash of the build context (every file's path, mode and bytes, in sorted order) and of the
base image's id: an unchanged recipe on an unchanged base reuses its image, a changed one builds a new tag.
Nothing is pulled (``pull=False``) and ``RUN`` steps have no network; a ``FROM`` naming an image the engine lacks
fails with the build log.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any

from agentrl.sandbox.images import BASE_IMAGE, ImageBuildError, _client

TAG_PREFIX = "agentrl/recipe-"
HASH_LEN = 12
LOG_TAIL_LINES = 25
_FROM_BASE = re.compile(r"^\s*FROM\s+(--\S+\s+)*\$\{?BASE_IMAGE\}?(\s|$)", re.IGNORECASE | re.MULTILINE)


class RecipeImageError(ImageBuildError):
    """A recipe image cannot be built; the message says why (and shows the end of the build log)."""


def _log(msg: str) -> None:
    print(f"[agentrl sandbox] {msg}", file=sys.stderr, flush=True)


def repository_name(name: str) -> str:
    """The image repository of recipe `name` (lowercased, characters Docker rejects replaced by ``-``).

    Raises:
        RecipeImageError: nothing usable is left of `name`.
    """
    clean = re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("._-")
    if not clean:
        raise RecipeImageError(f"recipe name {name!r} has no characters usable in an image name ([a-z0-9._-])")
    return f"{TAG_PREFIX}{clean}"


def context_hash(context_dir: str | Path, base_id: str = "") -> str:
    """Hex SHA-256 of a build context: each file's relative path, type, executable bit and content (or link
    target), in sorted order, then `base_id` (the base image's id, so a rebuilt base rebuilds the recipe)."""
    root = Path(context_dir)
    digest = hashlib.sha256()
    entries = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            entries.append((path.relative_to(root).as_posix(), path))
    for rel, path in sorted(entries):
        st = path.lstat()
        digest.update(rel.encode() + b"\0")
        if stat.S_ISLNK(st.st_mode):
            digest.update(b"L" + os.readlink(path).encode() + b"\0")
        elif stat.S_ISDIR(st.st_mode):
            digest.update(b"D\0")
        else:
            digest.update(b"X" if st.st_mode & 0o111 else b"F")
            digest.update(str(st.st_size).encode() + b"\0")
            with open(path, "rb") as f:
                while chunk := f.read(1 << 20):
                    digest.update(chunk)
    digest.update(b"base\0" + base_id.encode())
    return digest.hexdigest()


def _check_context(context_dir: Path) -> Path:
    if not context_dir.is_dir():
        raise RecipeImageError(f"recipe build context {context_dir} is not a folder")
    dockerfile = context_dir / "Dockerfile"
    if not dockerfile.is_file():
        raise RecipeImageError(
            f"no Dockerfile in the recipe build context {context_dir}: add one starting with\n"
            "    ARG BASE_IMAGE\n    FROM ${BASE_IMAGE}"
        )
    if not _FROM_BASE.search(dockerfile.read_text(errors="replace")):
        raise RecipeImageError(
            f"{dockerfile} does not build on the sandbox base image (no registry can be reached): "
            "start it with\n    ARG BASE_IMAGE\n    FROM ${BASE_IMAGE}"
        )
    return dockerfile


def _base_id(client: Any, base: str) -> str:
    import docker

    try:
        return client.images.get(base).id
    except docker.errors.ImageNotFound:
        raise RecipeImageError(
            f"base image {base} is missing: run `agentrl sandbox build` (or scripts/setup.sh) first"
        ) from None


def recipe_image_tag(context_dir: str | Path, name: str, base: str = BASE_IMAGE, client: Any = None) -> str:
    """The tag `build_recipe_image` gives this context on this base, ``agentrl/recipe-<name>:<hash12>``."""
    context_dir = Path(context_dir)
    _check_context(context_dir)
    base_id = _base_id(client or _client(), base)
    return f"{repository_name(name)}:{context_hash(context_dir, base_id)[:HASH_LEN]}"


def _log_tail(build_log: Any, lines: int = LOG_TAIL_LINES) -> str:
    text = []
    for entry in build_log or []:
        if isinstance(entry, dict):
            text.append(str(entry.get("stream") or entry.get("error") or entry.get("status") or ""))
        else:
            text.append(str(entry))
    return "\n".join("".join(text).splitlines()[-lines:])


def build_recipe_image(
    context_dir: str | Path,
    name: str,
    base: str = BASE_IMAGE,
    force: bool = False,
    client: Any = None,
    network_mode: str = "none",
) -> str:
    """Build the image of a recipe's build context on top of `base` (no pulls); return its tag.

    The build is skipped when the tag (which hashes the context and the base image id) already exists, unless
    `force`. The Dockerfile receives the base as the build argument ``BASE_IMAGE``.

    Args:
        context_dir: the build context, holding a ``Dockerfile`` that starts ``ARG BASE_IMAGE`` /
            ``FROM ${BASE_IMAGE}``.
        name: the recipe's name; the image is ``agentrl/recipe-<name>:<hash12>``.
        base: the image to build on (must exist locally).
        force: build again, without the layer cache, even when the tag exists.
        client: a `docker.DockerClient`; default: one for the local engine.
        network_mode: network of the build's ``RUN`` steps; none by default (nothing can be fetched anyway).

    Raises:
        RecipeImageError: no Dockerfile, a Dockerfile not built on the base, a missing base image, or a failed
            build (with the end of the build log).
    """
    import docker

    context_dir = Path(context_dir).resolve()
    _check_context(context_dir)
    client = client or _client()
    base_id = _base_id(client, base)
    digest = context_hash(context_dir, base_id)
    tag = f"{repository_name(name)}:{digest[:HASH_LEN]}"
    if not force:
        try:
            client.images.get(tag)
        except docker.errors.ImageNotFound:
            pass
        else:
            _log(f"{tag} is up to date (build context unchanged): reusing it")
            return tag
    _log(f"building {tag} from {context_dir} on {base}")
    labels = {"agentrl.recipe": name, "agentrl.context_hash": digest, "agentrl.base": base_id}
    docker_build(client, context_dir, tag, buildargs={"BASE_IMAGE": base}, labels=labels, force=force,
                 network_mode=network_mode)  # fmt: skip
    _log(f"built {tag}")
    return tag


def docker_build(
    client: Any,
    context_dir: Path,
    tag: str,
    *,
    buildargs: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    force: bool = False,
    network_mode: str = "none",
    timeout_s: float | None = None,
) -> None:
    """`docker build` of `context_dir` as `tag`, offline: nothing pulled, intermediate containers removed even
    when the build fails.

    Raises:
        RecipeImageError: the build failed (with the end of its log), or took longer than `timeout_s`.
    """
    import docker
    import requests

    extra = {"timeout": timeout_s} if timeout_s else {}
    try:
        client.images.build(
            path=str(context_dir),
            tag=tag,
            pull=False,
            rm=True,
            forcerm=True,  # intermediate containers go away on failures too
            nocache=force,
            network_mode=network_mode,
            buildargs=buildargs or {},
            labels=labels or {},
            **extra,
        )
    except docker.errors.BuildError as exc:
        raise RecipeImageError(
            f"building image {tag} from {context_dir} failed: {exc.msg}\n"
            f"--- end of the build log ---\n{_log_tail(exc.build_log)}"
        ) from exc
    except docker.errors.APIError as exc:
        raise RecipeImageError(f"building image {tag} from {context_dir} failed: {exc}") from exc
    except requests.exceptions.ReadTimeout:
        raise RecipeImageError(f"building image {tag} from {context_dir} took longer than {timeout_s}s") from None


def main(argv: list[str] | None = None) -> int:
    """Command line: ``python -m agentrl.sandbox.recipe_images CONTEXT_DIR --name NAME [--base IMAGE] [--force]``."""
    parser = argparse.ArgumentParser(description="Build a recipe's sandbox image on the base image (offline).")
    parser.add_argument("context_dir", type=Path, help="the build context (a folder with a Dockerfile)")
    parser.add_argument("--name", required=True, help="recipe name: the image is agentrl/recipe-<name>:<hash>")
    parser.add_argument("--base", default=BASE_IMAGE, help=f"base image (default {BASE_IMAGE})")
    parser.add_argument("--force", action="store_true", help="rebuild even when the tag exists")
    args = parser.parse_args(argv)
    try:
        print(build_recipe_image(args.context_dir, args.name, base=args.base, force=args.force))
    except ImageBuildError as e:
        _log(f"error: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
