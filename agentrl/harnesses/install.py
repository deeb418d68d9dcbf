"""Installing a harness without any download outside the package registries: its npm package (a native binary for
linux x64) fetched with `npm pack` into agentrl's cache, unpacked into an image layer on the sandbox base image
(`agentrl/harness-<name>:<version>`), and that layer's files copied once into a Docker volume that every task
container mounts read-only, whatever its own image. Nothing is vendored into the repository."""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from agentrl.errors import UserError
from agentrl.harnesses.spec import Harness
from agentrl.sandbox.images import BASE_IMAGE


class HarnessInstallError(UserError):
    """A harness could not be fetched, built or installed."""


def prepare_harness(harness: Harness, client: Any = None) -> str:
    """The volume holding `harness`'s files, built first when missing (minutes the first time: the package is
    hundreds of MB); returns the volume's name.

    Raises:
        HarnessInstallError: npm, the registry or Docker failed, saying what to do.
    """
    from agentrl.sandbox.containers import docker_client

    client = client or docker_client()
    if _volume_holds_binary(client, harness):
        return harness.volume
    if not client.images.list(name=harness.tag):
        _build_image(client, harness, fetch_package(harness))
    _fill_volume(client, harness)
    if not _volume_holds_binary(client, harness):
        raise HarnessInstallError(f"the volume {harness.volume} has no {harness.binary} after it was filled")
    return harness.volume


def fetch_package(harness: Harness) -> Path:
    """The package's tarball in agentrl's cache, fetched with `npm pack` when missing."""
    folder = Path(os.environ.get("AGENTRL_NPM_CACHE", Path.home() / ".cache" / "agentrl" / "npm"))
    folder.mkdir(parents=True, exist_ok=True)
    scope_name, _, version = harness.package.rpartition("@")
    expected = folder / f"{scope_name.lstrip('@').replace('/', '-')}-{version}.tgz"
    if expected.is_file():
        return expected
    if shutil.which("npm") is None:
        raise HarnessInstallError(
            f"installing the {harness.name} harness needs npm to fetch {harness.package}: "
            "`apt-get install npm` (or run `make setup`)"
        )
    proc = subprocess.run(
        ["npm", "pack", "--silent", "--pack-destination", str(folder), harness.package],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0 or not expected.is_file():
        raise HarnessInstallError(
            f"`npm pack {harness.package}` failed (is the npm registry reachable?): {proc.stderr.strip()[-800:]}"
        )
    return expected


def _build_image(client: Any, harness: Harness, tarball: Path) -> None:
    import docker

    with tempfile.TemporaryDirectory(prefix="agentrl-harness-") as tmp:
        with tarfile.open(tarball) as tar:
            tar.extractall(tmp, filter="data")
        dockerfile = f"FROM {BASE_IMAGE}\nCOPY package/ {harness.home}/\n"
        Path(tmp, "Dockerfile").write_text(dockerfile)
        try:
            client.images.build(path=tmp, tag=harness.tag, network_mode="none", rm=True, pull=False)
        except docker.errors.BuildError as exc:
            log = "".join(str(line.get("stream", "")) for line in exc.build_log)[-1500:]
            raise HarnessInstallError(f"building {harness.tag} failed: {exc}\n{log}") from exc
        except docker.errors.DockerException as exc:
            raise HarnessInstallError(
                f"building {harness.tag} failed: {exc} (is {BASE_IMAGE} built? `agentrl sandbox build`)"
            ) from exc


def _fill_volume(client: Any, harness: Harness) -> None:
    """Docker copies an image's files into an empty volume mounted over them: the volume gets the layer's files."""
    import docker

    try:
        for volume in client.volumes.list(filters={"name": harness.volume}):
            if volume.name == harness.volume:  # a fill that was interrupted: start over
                volume.remove(force=True)
        client.volumes.create(name=harness.volume, labels={"agentrl.harness": harness.package})
        mount = {harness.volume: {"bind": harness.home, "mode": "rw"}}
        client.containers.run(harness.tag, ["true"], volumes=mount, network_mode="none", remove=True)
    except docker.errors.DockerException as exc:
        raise HarnessInstallError(f"filling the volume {harness.volume} failed: {exc}") from exc


def _volume_holds_binary(client: Any, harness: Harness) -> bool:
    import docker

    if not any(v.name == harness.volume for v in client.volumes.list(filters={"name": harness.volume})):
        return False
    mount = {harness.volume: {"bind": harness.home, "mode": "ro"}}
    try:
        client.containers.run(BASE_IMAGE, ["test", "-x", harness.binary], volumes=mount, network_mode="none",
                              remove=True)  # fmt: skip
    except docker.errors.DockerException:
        return False
    return True


def main() -> int:
    """`python -m agentrl.harnesses.install [NAME ...]`: prepare the named harnesses (default: all)."""
    import sys

    from agentrl.harnesses.builtin import HARNESSES, get_harness

    for name in sys.argv[1:] or list(HARNESSES):
        harness = get_harness(name)
        print(f"    {harness.name}: {harness.package} in volume {prepare_harness(harness)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
