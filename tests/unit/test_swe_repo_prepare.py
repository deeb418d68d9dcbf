"""`prepare_repo` when the preparation script's output comes back empty (seen once under load): the commit is
asked again, and a sandbox that cannot say it fails the trajectory as a sandbox error, never an IndexError."""

from __future__ import annotations

import pytest

from agentrl.sandbox.base import ExecResult, SandboxError
from agentrl.swe.repo import prepare_repo
from agentrl.swe.task import SWETask


class QuietSandbox:
    workdir = "/work"

    def __init__(self, answers: list[str]):
        self.answers = answers

    async def exec(self, cmd, timeout=None, workdir=None, env=None) -> ExecResult:
        return ExecResult(0, self.answers.pop(0), "")


def task() -> SWETask:
    return SWETask(instance_id="t", repo_dir="/testbed", problem_statement="x", base_commit="")


async def test_an_empty_answer_is_asked_again() -> None:
    assert await prepare_repo(QuietSandbox(["", "abc123\n"]), task()) == "abc123"


async def test_a_sandbox_that_never_says_its_commit_is_a_sandbox_error() -> None:
    with pytest.raises(SandboxError, match="its commit cannot be read"):
        await prepare_repo(QuietSandbox(["", ""]), task())
