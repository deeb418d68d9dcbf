"""Fixtures for integration tests: real Docker engine, real images.

Outside CI a missing engine or image skips the test with the reason; with ``CI=true`` it fails instead.
"""

from __future__ import annotations

import os

import pytest


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (CI=true: not skipping)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def docker_client():
    """A ``docker.DockerClient`` connected to an engine that answers."""
    import docker

    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as e:
        _unavailable(f"no Docker engine answers ({e}): run scripts/setup.sh or start dockerd")
    yield client
    client.close()


@pytest.fixture(scope="session")
def sandbox_base_image(docker_client) -> str:
    """The tag of the sandbox base image, which must already be built."""
    from agentrl.sandbox.images import BASE_IMAGE, image_exists

    if not image_exists(BASE_IMAGE):
        _unavailable(f"image {BASE_IMAGE} is missing: run `agentrl sandbox build` or scripts/setup.sh")
    return BASE_IMAGE


@pytest.fixture(scope="session")
def default_model_path() -> str:
    """The prepared default model folder (prepared here if needed)."""
    from agentrl.models import resolve_model

    return resolve_model("default")


@pytest.fixture(scope="session")
def default_tokenizer(default_model_path):
    from agentrl.models import load_tokenizer

    return load_tokenizer(default_model_path)


@pytest.fixture(scope="session")
def hf_server_url(default_model_path):
    """One real `hf` rollout server with the default model, shared by the session's tests."""
    from agentrl.rollout.servers.hf.launch import launch_hf_server

    handle = launch_hf_server(default_model_path, max_model_len=2048)
    yield handle.url
    handle.stop()
