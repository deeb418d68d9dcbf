"""Recipe images on the real engine: built offline on the base image, reused while unchanged, rebuilt on change."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from agentrl.sandbox.docker import LABEL, DockerSandbox
from agentrl.sandbox.recipe_images import RecipeImageError, build_recipe_image, context_hash

pytestmark = pytest.mark.integration

NAME = "agentrl-test-tiny"
DOCKERFILE = """\
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
COPY greeting.txt /opt/recipe/greeting.txt
RUN echo built-by-recipe > /opt/recipe/marker
"""


@pytest.fixture
def context(tmp_path: Path) -> Path:
    ctx = tmp_path / "image"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text(DOCKERFILE)
    (ctx / "greeting.txt").write_text("hello from the recipe\n")
    return ctx


@pytest.fixture
def created_images(docker_client):
    """Tags the test built; removed at the end with the untagged layers its builds left, whatever happens."""
    import docker

    before = {image.id for image in docker_client.images.list(all=True)}
    tags: list[str] = []
    yield tags
    for tag in reversed(tags):
        with contextlib.suppress(docker.errors.NotFound):
            docker_client.images.remove(tag, force=True)
    for image in docker_client.images.list(all=True):  # layers cached by a failed build
        if image.id not in before and not image.tags:
            with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
                docker_client.images.remove(image.id, force=True)
    assert not docker_client.images.list(name=f"agentrl/recipe-{NAME}")
    assert not docker_client.containers.list(all=True, filters={"label": LABEL}, sparse=True)


async def test_build_run_reuse_and_rebuild(docker_client, sandbox_base_image, context, created_images, capsys):
    tag = build_recipe_image(context, NAME, base=sandbox_base_image, client=docker_client)
    created_images.append(tag)
    repo, _, digest = tag.rpartition(":")
    assert repo == f"agentrl/recipe-{NAME}" and len(digest) == 12
    image = docker_client.images.get(tag)
    assert image.labels["agentrl.recipe"] == NAME

    sandbox = await DockerSandbox.create(tag, client=docker_client, run_id="test-recipe", memory="128m")
    try:
        result = await sandbox.exec("cat /opt/recipe/greeting.txt /opt/recipe/marker; id -u")
        assert result.ok, result
        assert result.stdout == "hello from the recipe\nbuilt-by-recipe\n1000\n"
    finally:
        await sandbox.close()

    capsys.readouterr()
    again = build_recipe_image(context, NAME, base=sandbox_base_image, client=docker_client)
    assert again == tag and docker_client.images.get(again).id == image.id
    assert "reusing" in capsys.readouterr().err  # skipped: no build ran

    (context / "greeting.txt").write_text("hello again\n")
    changed = build_recipe_image(context, NAME, base=sandbox_base_image, client=docker_client)
    created_images.append(changed)
    assert changed != tag and changed.startswith(f"agentrl/recipe-{NAME}:")
    out = docker_client.containers.run(changed, ["cat", "/opt/recipe/greeting.txt"], remove=True, network_mode="none")
    assert out == b"hello again\n"


def test_hash_covers_content_names_modes_and_base(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text(DOCKERFILE)
    (tmp_path / "a.sh").write_text("echo a")
    first = context_hash(tmp_path, "sha256:base1")
    assert context_hash(tmp_path, "sha256:base1") == first
    assert context_hash(tmp_path, "sha256:base2") != first
    (tmp_path / "a.sh").chmod(0o755)
    assert context_hash(tmp_path, "sha256:base1") != first
    (tmp_path / "a.sh").rename(tmp_path / "b.sh")
    assert context_hash(tmp_path, "sha256:base1") != first


def test_clear_errors(docker_client, sandbox_base_image, tmp_path: Path, created_images) -> None:
    with pytest.raises(RecipeImageError, match="no Dockerfile"):
        build_recipe_image(tmp_path, NAME, base=sandbox_base_image, client=docker_client)

    (tmp_path / "Dockerfile").write_text("FROM debian:bookworm\n")
    with pytest.raises(RecipeImageError, match="FROM"):
        build_recipe_image(tmp_path, NAME, base=sandbox_base_image, client=docker_client)

    (tmp_path / "Dockerfile").write_text(DOCKERFILE.replace("COPY greeting.txt", "COPY missing.txt"))
    (tmp_path / "greeting.txt").write_text("x")
    with pytest.raises(RecipeImageError, match="failed") as info:
        build_recipe_image(tmp_path, NAME, base=sandbox_base_image, client=docker_client)
    assert "missing.txt" in str(info.value) and "end of the build log" in str(info.value)

    with pytest.raises(RecipeImageError, match="agentrl sandbox build"):
        build_recipe_image(tmp_path, NAME, base="agentrl/sandbox:no-such-base", client=docker_client)
