"""A run's SWE task images, prepared when the run starts: the images its samples name that this machine lacks are
built then (the first run of those tasks; later runs find them), so that `make setup` need not build every
bundled task's image and a run never loses a trajectory's time budget to a build. Images agentrl cannot build (a
published dataset's) are refused at start, with how to get them."""

from __future__ import annotations

import time

from agentrl.errors import UserError
from agentrl.swe.images import _log, build_task_images, how_to_get, missing_images
from agentrl.swe.task import SWETask, TaskError
from agentrl.types import Sample


def prepare_task_images(samples: list[Sample]) -> list[str]:
    """Build the missing images of the SWE tasks among `samples` (the sandbox base image first, when it is
    missing too); returns the task ids built. Idempotent: nothing happens when every image is there.

    Raises:
        UserError: no Docker engine answers, an image agentrl cannot build is missing, or a build failed.
    """
    tasks = _tasks(samples)
    if not tasks:
        return []
    from agentrl.sandbox.containers import docker_client

    client = docker_client()
    missing = missing_images(tasks, client)
    if not missing:
        return []
    foreign = [t for t in missing if not (t.image_build or {}).get("sdist")]
    if foreign:
        names = ", ".join(t.image for t in foreign[:3]) + (" ..." if len(foreign) > 3 else "")
        raise UserError(f"{len(foreign)} task image(s) are missing and agentrl cannot build them ({names}): "
                        f"{how_to_get(foreign[0])}")  # fmt: skip
    _ensure_base_image()
    _log(f"{len(missing)} task image(s) of this run are missing: building them now (once; later runs reuse them)")
    built = []
    for i, task in enumerate(missing, 1):
        started = time.perf_counter()
        built += build_task_images([task], client=client)
        _log(f"[{i}/{len(missing)}] {task.instance_id} ({time.perf_counter() - started:.0f} s)")
    return built


def _tasks(samples: list[Sample]) -> list[SWETask]:
    tasks = []
    for sample in samples:
        try:
            tasks.append(SWETask.from_sample(sample))
        except TaskError:
            continue  # not a SWE task: the loop reports it when it plays the row
    return tasks


def _ensure_base_image() -> None:
    from agentrl.sandbox.images import BASE_IMAGE, build_base_image, image_exists

    if not image_exists(BASE_IMAGE):
        _log(f"the sandbox base image {BASE_IMAGE} is missing: building it first (a few minutes, once)")
        build_base_image()
