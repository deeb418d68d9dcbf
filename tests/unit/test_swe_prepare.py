"""A run's missing SWE task images are built when it starts (the base image first when it is missing too), with
progress; images agentrl cannot build are refused with how to get them; nothing happens when all are there. The
Docker engine and the builds are FAKE here (tests/integration builds for real: the `task` fixtures)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import agentrl.sandbox.images as sandbox_images
import agentrl.swe.prepare as prepare
from agentrl.errors import UserError
from agentrl.swe.task import load_tasks
from agentrl.types import Message, Sample

TASKS = load_tasks(Path(__file__).parents[2] / "recipes" / "swe_easy" / "data" / "train.jsonl")[:3]


@pytest.fixture
def engine(monkeypatch):
    """A fake engine holding `engine.images`; builds add the task's image and are recorded."""

    class Engine:
        images: set[str] = set()
        built: list[str] = []
        base_built = False

    monkeypatch.setattr("agentrl.sandbox.containers.docker_client", lambda: Engine)
    monkeypatch.setattr(
        prepare, "missing_images", lambda tasks, client: [t for t in tasks if t.image not in client.images]
    )

    def build(tasks, client):
        for t in tasks:
            client.images.add(t.image)
            client.built.append(t.instance_id)
        return [t.instance_id for t in tasks]

    def build_base():
        Engine.base_built = True

    monkeypatch.setattr(prepare, "build_task_images", build)
    monkeypatch.setattr(sandbox_images, "image_exists", lambda tag: Engine.base_built)
    monkeypatch.setattr(sandbox_images, "build_base_image", build_base)
    Engine.images, Engine.built, Engine.base_built = set(), [], False
    return Engine


def test_the_missing_images_are_built_once_the_base_image_first_with_progress(engine, capsys):
    engine.images.add(TASKS[0].image)
    samples = [t.to_sample() for t in TASKS] + [Sample(prompt=[Message(role="user", content="not a task")])]
    assert prepare.prepare_task_images(samples) == [t.instance_id for t in TASKS[1:]]
    assert engine.base_built and engine.built == [t.instance_id for t in TASKS[1:]]
    err = capsys.readouterr().err
    assert "2 task image(s) of this run are missing" in err and f"[2/2] {TASKS[2].instance_id}" in err
    assert prepare.prepare_task_images(samples) == [] and len(engine.built) == 2  # the second run builds nothing


def test_an_image_agentrl_cannot_build_is_refused_with_how_to_get_it(engine):
    foreign = TASKS[0].model_copy(update={"image_build": None})  # a published dataset's task: pulled, not built
    with pytest.raises(UserError, match=re.escape(f"cannot build them ({foreign.image}): pull it")):
        prepare.prepare_task_images([foreign.to_sample(), TASKS[1].to_sample()])
    assert engine.built == []  # nothing is built before the run could start
