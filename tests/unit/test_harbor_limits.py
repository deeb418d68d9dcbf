"""A task's budgets and container limits (task.toml capped by the run's config), and its image's FROM check."""

import pytest

from agentrl.config.schema import SandboxConfig
from agentrl.harbor.images import HarborImageError, base_images, repository, task_image
from agentrl.harbor.limits import docker_size_mb, task_limits
from agentrl.harbor.task import load_task
from tests.unit.harbor_helpers import write_task

FULL = """\
[agent]
timeout_sec = 600.0
[verifier]
timeout_sec = 900.0
[environment]
build_timeout_sec = 120.0
cpus = 4
memory_mb = 8192
storage_mb = 10240
network_mode = "{network}"
workdir = "/srv"
"""


def limits_of(tmp_path, toml, sandbox=None, **caps):
    task = load_task(write_task(tmp_path, "t", toml=toml))
    return task_limits(task, sandbox or SandboxConfig(), **caps)


def test_task_values_below_the_caps_are_kept(tmp_path):
    toml = "[agent]\ntimeout_sec = 20\n[verifier]\ntimeout_sec = 10\n[environment]\ncpus = 0.5\nmemory_mb = 256\n"
    limits = limits_of(tmp_path, toml, SandboxConfig(cpus=2, memory="1g"), agent_cap_s=300, verifier_cap_s=300)
    assert (limits.agent_timeout_s, limits.verifier_timeout_s) == (20, 10)
    assert (limits.cpus, limits.memory_mb) == (0.5, 256)


def test_task_values_above_the_caps_are_capped(tmp_path):
    sandbox = SandboxConfig(cpus=1.0, memory="2g", network=True)
    limits = limits_of(tmp_path, FULL.format(network="public"), sandbox, agent_cap_s=60, verifier_cap_s=45)
    assert (limits.agent_timeout_s, limits.verifier_timeout_s) == (60, 45)
    assert (limits.cpus, limits.memory_mb) == (1.0, 2048)
    assert limits.build_timeout_s == 120 and limits.workdir == "/srv" and limits.storage_mb == 10240
    assert limits.network is True
    assert limits.record()["memory_mb"] == 2048


def test_what_a_task_leaves_out_is_the_cap(tmp_path):
    limits = limits_of(tmp_path, "", SandboxConfig(cpus=1.5, memory="768m"))
    assert limits.agent_timeout_s is None and limits.verifier_timeout_s == 600.0  # Harbor's verifier default
    assert (limits.cpus, limits.memory_mb) == (1.5, 768)
    assert limits_of(tmp_path, "", agent_cap_s=30).agent_timeout_s == 30


@pytest.mark.parametrize(
    ("mode", "allowed", "network"),
    [("public", True, True), ("allowlist", True, True), ("no-network", True, False), ("public", False, False)],
)
def test_network_needs_both_the_task_and_the_run(tmp_path, mode, allowed, network):
    toml = FULL.format(network=mode) + ('allowed_hosts = ["pypi.org"]\n' if mode == "allowlist" else "")
    assert limits_of(tmp_path, toml, SandboxConfig(network=allowed)).network is network


def test_docker_sizes_in_mb():
    assert [docker_size_mb(s) for s in ("1g", "512m", "2048k", "1073741824", "1.5G")] == [1024, 512, 2, 1024, 1536]
    with pytest.raises(ValueError, match="invalid size"):
        docker_size_mb("a lot")


def test_base_images_of_a_dockerfile():
    dockerfile = """\
# syntax=docker/dockerfile:1
ARG PY=3.11
ARG BASE_IMAGE
FROM --platform=linux/amd64 python:${PY}-slim AS build
RUN echo hi \\
    && echo more
FROM ${BASE_IMAGE}
COPY --from=build /x /x
FROM build AS again
FROM scratch
"""
    assert base_images(dockerfile, {"BASE_IMAGE": "agentrl/sandbox:base"}) == [
        "python:3.11-slim",
        "agentrl/sandbox:base",
    ]
    assert base_images("FROM ubuntu:24.04\nWORKDIR /app\n") == ["ubuntu:24.04"]


class FakeImages:
    def __init__(self, present):
        self.present = set(present)
        self.built = []

    def get(self, tag):
        import docker

        if tag not in self.present:
            raise docker.errors.ImageNotFound(tag)
        return type("Image", (), {"id": f"sha256:{abs(hash(tag))}", "attrs": {"Config": {"WorkingDir": "/app"}}})()

    def build(self, **kwargs):
        self.built.append(kwargs)
        self.present.add(kwargs["tag"])


class FakeClient:
    def __init__(self, present):
        self.images = FakeImages(present)


def test_a_missing_from_image_fails_before_building_naming_it(tmp_path):
    task = load_task(write_task(tmp_path, "t"))
    task.dockerfile.write_text("FROM ubuntu:24.04\nWORKDIR /app\n")
    client = FakeClient(present=["agentrl/sandbox:base"])
    with pytest.raises(HarborImageError) as err:
        task_image(task, client)
    assert "ubuntu:24.04" in str(err.value) and "test/t" in str(err.value) and "nothing is pulled" in str(err.value)
    assert client.images.built == []


def test_task_images_are_tagged_by_content_and_built_once(tmp_path):
    task = load_task(write_task(tmp_path, "t"))
    client = FakeClient(present=["agentrl/sandbox:base"])
    tag = task_image(task, client)
    assert tag.startswith(repository("test/t") + ":") and repository("test/t") == "agentrl/harbor-test-t"
    assert task_image(task, client) == tag and len(client.images.built) == 1  # unchanged: reused
    build = client.images.built[0]
    assert build["pull"] is False and build["network_mode"] == "none" and build["timeout"] == 600.0
    (task.environment_dir / "extra.txt").write_text("new file")
    assert task_image(task, client) != tag and len(client.images.built) == 2  # edited: rebuilt


def test_a_prebuilt_docker_image_is_used_as_is_or_named_when_missing(tmp_path):
    task = load_task(write_task(tmp_path, "t", toml='[environment]\ndocker_image = "team/img:1"\n'))
    assert task_image(task, FakeClient(present=["team/img:1"])) == "team/img:1"
    with pytest.raises(HarborImageError, match="team/img:1"):
        task_image(task, FakeClient(present=[]))
