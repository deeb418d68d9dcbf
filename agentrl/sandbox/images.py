"""Offline build of the sandbox base image.

No registry can be reached, so the base image is made from scratch: ``debootstrap`` a minimal Debian into a
temporary root filesystem from the mirror this machine's apt sources already name, then ``docker import`` it.
Recipes layer their own images on top of it with ``docker build``.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from agentrl.errors import UserError

BASE_IMAGE = "agentrl/sandbox:base"
SUITE = "bookworm"
PACKAGES = ("bash", "coreutils", "python3", "git", "patch")
IMAGE_CHANGES = ("WORKDIR /work", "ENV LANG=C.UTF-8", 'CMD ["bash"]')
APT_SOURCE_GLOBS = ("/etc/apt/sources.list", "/etc/apt/sources.list.d/*.list", "/etc/apt/sources.list.d/*.sources")
DEB_CACHE = "/var/cache/agentrl/debootstrap"


class ImageBuildError(UserError):
    """The image is missing and cannot be built here; the message says what to do about it."""


def _log(msg: str) -> None:
    print(f"[agentrl sandbox] {msg}", file=sys.stderr, flush=True)


def parse_apt_sources(text: str, deb822: bool) -> list[tuple[str, list[str], list[str]]]:
    """Parse one apt sources file into ``(uri, suites, components)`` for its binary (``deb``) entries."""
    if not deb822:
        out = []
        for line in text.splitlines():
            # drop comments and options: deb [arch=amd64 signed-by=...] URI suite component...
            words = re.sub(r"\[[^\]]*\]", " ", line.split("#", 1)[0]).split()
            if len(words) >= 3 and words[0] == "deb":
                out.append((words[1], [words[2]], words[3:]))
        return out
    entries = []
    for stanza in text.replace("\r", "").split("\n\n"):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if line and not line[0].isspace() and not line.startswith("#") and ":" in line:
                key, value = line.split(":", 1)
                fields[key.strip().lower()] = value.strip()
        if "deb" in fields.get("types", "").split() and fields.get("enabled", "yes").lower() != "no":
            for uri in fields.get("uris", "").split():
                entries.append((uri, fields.get("suites", "").split(), fields.get("components", "").split()))
    return entries


def pick_debian_mirror(files: Iterable[tuple[str, str]], suite: str = SUITE) -> str | None:
    """Return the mirror URI serving ``suite`` main from ``(filename, text)`` pairs, or None.

    Only the release suite counts: ``-security``/``-updates`` suites and third-party repositories are skipped.
    """
    entries = [e for name, text in files for e in parse_apt_sources(text, name.endswith(".sources"))]
    usable = [(u, s, c) for u, s, c in entries if "main" in c and u.split(":", 1)[0] in ("http", "https", "file")]
    for uri, suites, _ in usable:
        if suite in suites:
            return uri.rstrip("/")
    for uri, suites, _ in usable:  # host runs another release: its plain Debian archive also serves ours
        if uri.rstrip("/").endswith("/debian") and any("-" not in s for s in suites):
            return uri.rstrip("/")
    return None


def host_debian_mirror(suite: str = SUITE) -> str:
    """Find the Debian mirror in this machine's apt sources."""
    paths = sorted(p for pattern in APT_SOURCE_GLOBS for p in glob.glob(pattern))
    mirror = pick_debian_mirror(((p, Path(p).read_text(errors="replace")) for p in paths), suite)
    if mirror is None:
        raise ImageBuildError(
            f"no Debian mirror found in /etc/apt/sources.list or /etc/apt/sources.list.d/ serving '{suite} main':"
            " add one (a 'deb URI suite main' line or a deb822 stanza) and retry"
        )
    return mirror


def _client():  # -> docker.DockerClient
    from agentrl.sandbox.base import SandboxError
    from agentrl.sandbox.containers import docker_client

    try:
        return docker_client()
    except SandboxError as e:
        raise ImageBuildError(f"cannot reach Docker to build or find images: {e}; scripts/setup.sh starts it") from e


def image_exists(tag: str, client: Any = None) -> bool:
    """True when the Docker engine (`client`, default: the local one) has an image called ``tag``."""
    import docker

    try:
        (client or _client()).images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def _debootstrap(rootfs: Path, mirror: str) -> None:
    if shutil.which("debootstrap") is None:
        raise ImageBuildError("debootstrap not found: apt-get install debootstrap (or run scripts/setup.sh)")
    if os.geteuid() != 0:
        raise ImageBuildError("debootstrap needs root: run this build as root (e.g. with sudo)")
    os.makedirs(DEB_CACHE, exist_ok=True)
    cmd = ["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", f"--cache-dir={DEB_CACHE}"]
    _log(f"debootstrap {SUITE} from {mirror} (a few minutes)")
    proc = subprocess.run([*cmd, SUITE, str(rootfs), mirror], capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-15:])
        raise ImageBuildError(f"debootstrap failed (exit {proc.returncode}); check the mirror is reachable:\n{tail}")


def _slim(rootfs: Path) -> None:
    """Drop package caches and make a world-writable /work."""
    for pattern in ("var/cache/apt/archives/*.deb", "var/lib/apt/lists/*_*", "var/log/*.log"):
        for path in rootfs.glob(pattern):
            path.unlink(missing_ok=True)
    work = rootfs / "work"
    work.mkdir(exist_ok=True)
    work.chmod(0o1777)


def _tar_chunks(proc: subprocess.Popen) -> Iterator[bytes]:
    while chunk := proc.stdout.read(1 << 20):
        yield chunk


def _import(client, rootfs: Path, tag: str) -> None:
    repository, _, version = tag.rpartition(":") if ":" in tag.split("/")[-1] else (tag, "", "latest")
    _log(f"docker import -> {tag}")
    proc = subprocess.Popen(["tar", "--numeric-owner", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
    try:
        result = client.api.import_image(
            src=_tar_chunks(proc), repository=repository, tag=version, changes=list(IMAGE_CHANGES), stream_src=True
        )
    finally:
        proc.stdout.close()
        code = proc.wait()
    if code != 0 or '"error' in str(result):
        raise ImageBuildError(f"docker import of {tag} failed (tar exit {code}): {result}")


def _remove_tree(path: Path) -> None:
    """Unmount anything a failed debootstrap left mounted below ``path``, then delete it."""
    with open("/proc/mounts") as f:
        mounts = [line.split()[1] for line in f if line.split()[1].startswith(f"{path}/")]
    for mount in sorted(mounts, reverse=True):
        subprocess.run(["umount", "-l", mount], check=False)
    shutil.rmtree(path, ignore_errors=True)


def build_base_image(force: bool = False, tag: str = BASE_IMAGE) -> str:
    """Build the sandbox base image offline (skipped when it exists, unless ``force``); return its tag."""
    client = _client()
    if not force and image_exists(tag):
        _log(f"{tag} already exists (use --force to rebuild)")
        return tag
    mirror = host_debian_mirror()
    tmp = Path(tempfile.mkdtemp(prefix="agentrl-rootfs-", dir="/var/tmp"))
    try:
        rootfs = tmp / "rootfs"
        _debootstrap(rootfs, mirror)
        _slim(rootfs)
        _import(client, rootfs, tag)
    finally:
        _remove_tree(tmp)
    _log(f"built {tag}")
    return tag


def main(argv: list[str] | None = None) -> int:
    """Command line: ``python -m agentrl.sandbox.images [--force] [--tag TAG]``."""
    parser = argparse.ArgumentParser(description="Build the sandbox base image offline.")
    parser.add_argument("--force", action="store_true", help="rebuild even when the image exists")
    parser.add_argument("--tag", default=BASE_IMAGE, help=f"image tag (default {BASE_IMAGE})")
    args = parser.parse_args(argv)
    try:
        build_base_image(force=args.force, tag=args.tag)
    except ImageBuildError as e:
        _log(f"error: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
