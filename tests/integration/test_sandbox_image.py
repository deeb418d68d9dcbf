"""The offline-built sandbox base image runs Python, git and patch with no network."""

import pytest

pytestmark = pytest.mark.integration


def _run(client, image: str, *cmd: str) -> str:
    out = client.containers.run(image, list(cmd), network_mode="none", remove=True, stderr=True)
    return out.decode().strip()


def test_python_runs_without_network(docker_client, sandbox_base_image) -> None:
    assert _run(docker_client, sandbox_base_image, "python3", "-c", "print(6*7)") == "42"


def test_git_and_patch_exist(docker_client, sandbox_base_image) -> None:
    assert _run(docker_client, sandbox_base_image, "git", "--version").startswith("git version")
    assert "patch" in _run(docker_client, sandbox_base_image, "patch", "--version").lower()


def test_workdir_is_writable(docker_client, sandbox_base_image) -> None:
    out = _run(docker_client, sandbox_base_image, "bash", "-c", "pwd && touch x && ls x && stat -c %a /work")
    assert out.split() == ["/work", "x", "1777"]
