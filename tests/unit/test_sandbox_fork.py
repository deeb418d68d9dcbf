"""Forking a sandbox: the local sandbox copies its folder; the children start where the parent is and then go
their own ways; a backend that cannot fork says so."""

from __future__ import annotations

import pytest

from agentrl.errors import ForkUnsupportedError
from agentrl.sandbox.base import ExecResult, Sandbox
from agentrl.sandbox.local import LocalSandbox


async def test_local_children_start_from_the_parents_files_and_then_diverge() -> None:
    parent = LocalSandbox()
    await parent.exec("mkdir -p repo && echo v1 > repo/a.txt && ln -s repo/a.txt link && echo x > .hidden")
    children = await parent.fork(2)
    try:
        for child in children:
            assert (await child.exec("cat link .hidden")).stdout == "v1\nx\n"
        await children[0].exec("echo c0 > repo/a.txt")
        await children[1].exec("echo c1 > repo/a.txt && touch only-c1")
        assert (await children[0].read_file("repo/a.txt")) == b"c0\n"
        assert (await children[1].read_file("repo/a.txt")) == b"c1\n"
        assert (await parent.read_file("repo/a.txt")) == b"v1\n"
        assert not (await children[0].exec("test -e only-c1")).ok
        assert children[0].exec_timeout_s == parent.exec_timeout_s
    finally:
        for sandbox in (parent, *children):
            await sandbox.close()


async def test_a_closed_sandbox_cannot_be_forked() -> None:
    sandbox = LocalSandbox()
    await sandbox.close()
    with pytest.raises(Exception, match="closed"):
        await sandbox.fork(1)


class _Remote(Sandbox):
    async def exec(self, cmd, timeout=None, workdir=None, env=None) -> ExecResult:
        return ExecResult(0, "", "")

    async def write_file(self, path, content, mode=0o644) -> None:
        pass

    async def read_file(self, path) -> bytes:
        return b""

    async def upload_dir(self, local_dir, dest=None) -> None:
        pass

    async def close(self) -> None:
        pass


async def test_a_backend_without_forks_refuses_by_name() -> None:
    with pytest.raises(ForkUnsupportedError, match="_Remote cannot be forked"):
        await _Remote().fork(2)
