"""Forking a real SWE task container after the agent edited a file: each child sees the edit, their own later
edits stay theirs, each child's patch grades on its own, and no container is left behind."""

from __future__ import annotations

import asyncio

import pytest

from agentrl.sandbox.containers import FORK_LABEL
from agentrl.sandbox.docker import DockerSandbox
from agentrl.swe.grading import grade_patch
from agentrl.swe.repo import extract_patch, open_task_sandbox
from agentrl.swe.report import patch_files

pytestmark = pytest.mark.integration


async def test_a_swe_container_forked_after_an_edit(task, no_leftovers):
    parent, base = await open_task_sandbox(task, run_id="fork-test")
    path = patch_files(task.patch)[0]
    children = []
    try:
        await parent.exec(f"echo '# parent was here' >> {path}")
        await parent.exec("setsid sleep 300 > /dev/null 2>&1 & sleep 0.5")  # a process: not carried over
        assert "sleep 300" in await _processes(parent)
        children = await parent.fork(2)
        assert [c.started_with for c in children] == [parent.started_with] * 2
        for child in children:
            assert "# parent was here" in (await child.read_file(path)).decode()
            assert "sleep 300" not in await _processes(child)
        gold = _gold_lines(task.patch)
        await children[0].write_file(path, (await children[0].read_file(path)).decode().replace(*gold, 1))
        await children[1].exec(f"echo '# child 1' >> {path}")
        patches = [await extract_patch(c, task, base, 60) for c in children]
        assert "# parent was here" in patches[0] and "# parent was here" in patches[1]
        assert "# child 1" in patches[1] and "# child 1" not in patches[0]
        assert gold[1] in patches[0] and gold[1] not in patches[1]
        assert "# child 1" not in (await parent.read_file(path)).decode()
        graded = await asyncio.gather(*(grade_patch(task, p) for p in patches))
        assert graded[0].resolved and not graded[1].resolved, [g.details() for g in graded]
    finally:
        for sandbox in (parent, *children):
            await sandbox.close()


async def test_a_task_image_sandbox_forks_through_a_committed_image(sandbox_base_image, docker_client, no_leftovers):
    parent = await DockerSandbox.create(sandbox_base_image, run_id="fork-test", task_image=True)
    children, grandchildren = [], []
    try:
        await parent.exec("mkdir -p /srv/app && echo parent > /srv/app/state.txt")  # the image's own layer
        children = await parent.fork(2)
        image = children[0].fork_images[0]
        assert docker_client.images.get(image).labels[FORK_LABEL] == "1"
        assert [c.started_with for c in children] == [parent.started_with] * 2
        for child in children:
            assert (await child.read_file("/srv/app/state.txt")).decode() == "parent\n"
        await children[0].exec("echo child-0 >> /srv/app/state.txt")
        assert (await children[1].read_file("/srv/app/state.txt")).decode() == "parent\n"  # its sibling's unseen
        grandchildren = await children[0].fork(1)
        assert grandchildren[0].fork_images[1] == image
        assert "child-0" in (await grandchildren[0].read_file("/srv/app/state.txt")).decode()
        await children[0].close()
        await children[1].close()
        assert _image_exists(docker_client, image)  # still the parent of the grandchild's image
        await grandchildren[0].close()
        assert not docker_client.images.list(filters={"label": f"{FORK_LABEL}=1"})  # each fork image went with it
    finally:
        for sandbox in (parent, *children, *grandchildren):
            await sandbox.close()


def _image_exists(client, image: str) -> bool:
    import docker

    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        return False
    return True


async def _processes(sandbox) -> str:
    return (await sandbox.exec("cat /proc/[0-9]*/cmdline | tr '\\0' ' '")).stdout


def _gold_lines(patch: str) -> tuple[str, str]:
    """The buggy line and its fix, from a one-line gold patch."""
    removed = [ln[1:] for ln in patch.splitlines() if ln.startswith("-") and not ln.startswith("---")]
    added = [ln[1:] for ln in patch.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    return removed[0], added[0]


async def test_a_fork_fills_the_containers_prepared_ahead(task, docker_client, no_leftovers):
    parent, _ = await open_task_sandbox(task, run_id="fork-test")
    path = patch_files(task.patch)[0]
    try:
        await parent.prepare_forks(2)
        await parent.exec(f"echo '# edited while the containers started' >> {path}")
        prepared = [await asyncio.wrap_future(spare) for spare in parent._spares]
        (child,) = await parent.fork(1)
        assert child.id == prepared[0].id  # filled, not started
        assert child.started_with == parent.started_with
        assert "# edited while the containers started" in (await child.read_file(path)).decode()
        await child.close()
    finally:
        await parent.close()
    unused = prepared[1].id
    assert not docker_client.containers.list(all=True, filters={"id": unused}), "an unused prepared container was left"


async def test_a_fork_cancelled_midway_leaves_no_container(sandbox_base_image, docker_client, no_leftovers):
    """Ctrl-C or a timeout while the containers of a fork are being made: they are closed once made, not at exit."""
    parent = await DockerSandbox.create(sandbox_base_image, run_id="fork-test", task_image=True)
    try:
        forking = asyncio.ensure_future(parent.fork(2))
        await asyncio.sleep(0.3)  # the commit is under way
        forking.cancel()
        with pytest.raises(asyncio.CancelledError):
            await forking
        for _ in range(100):  # the fork's thread finishes, then its containers are removed
            mine = docker_client.containers.list(all=True, filters={"label": "agentrl.run=fork-test"})
            if [c.id for c in mine] == [parent.id]:
                break
            await asyncio.sleep(0.2)
        assert [c.id for c in mine] == [parent.id]
    finally:
        await parent.close()
