"""LocalSandbox (dev only, not isolated) and the sandboxed built-in tools on it."""

from __future__ import annotations

import time

import pytest

from agentrl.sandbox.base import ExecResult, SandboxError
from agentrl.sandbox.local import LocalSandbox
from agentrl.tools import TOOLS, ToolCall, ToolSet, build_tools


@pytest.fixture
async def sandbox():
    sb = LocalSandbox(exec_timeout_s=5)
    yield sb
    await sb.close()


async def test_exec_collects_output_and_exit_code(sandbox: LocalSandbox) -> None:
    result = await sandbox.exec("echo out; echo err >&2; exit 3")
    assert (result.exit_code, result.stdout, result.stderr, result.timed_out) == (3, "out\n", "err\n", False)
    assert (await sandbox.exec("pwd")).stdout.strip() == sandbox.workdir
    assert (await sandbox.exec("echo $X", env={"X": "y"})).stdout == "y\n"


async def test_timeout_kills_the_process_group(sandbox: LocalSandbox) -> None:
    start = time.monotonic()
    result = await sandbox.exec("sleep 30 & sleep 30; echo never", timeout=0.5)
    assert result.timed_out and "never" not in result.stdout
    assert time.monotonic() - start < 5
    assert (await sandbox.exec("echo alive")).ok


async def test_output_is_capped() -> None:
    sb = LocalSandbox(max_output_bytes=100)
    try:
        result = await sb.exec("head -c 100000 /dev/zero | tr '\\0' a")
        assert result.truncated and result.stdout.startswith("a" * 100) and "99900 more bytes dropped" in result.stdout
    finally:
        await sb.close()


async def test_files(sandbox: LocalSandbox, tmp_path) -> None:
    await sandbox.write_file("a/b.txt", "hi")
    assert await sandbox.read_file("a/b.txt") == b"hi"
    assert (await sandbox.exec("cat a/b.txt")).stdout == "hi"
    with pytest.raises(FileNotFoundError):
        await sandbox.read_file("missing")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f.py").write_text("print(1)")
    await sandbox.upload_dir(tmp_path, "up")
    assert (await sandbox.exec("python3 up/d/f.py")).stdout == "1\n"


async def test_closed_sandbox_raises_sandbox_error() -> None:
    sb = LocalSandbox()
    await sb.close()
    await sb.close()  # again: nothing
    with pytest.raises(SandboxError):
        await sb.exec("true")


def test_builtin_tools_are_registered() -> None:
    import agentrl.tools.builtin  # noqa: F401 - registers them

    assert {"bash", "python", "editor", "submit"} <= set(TOOLS.names())
    tools = build_tools([{"class": "bash", "config": {"timeout_s": 5}}, {"class": "submit"}])
    assert [t.name for t in tools] == ["bash", "submit"]


async def test_tools_on_local_sandbox(sandbox: LocalSandbox) -> None:
    import agentrl.tools.builtin  # noqa: F401

    tools = ToolSet(
        build_tools([{"class": n} for n in ("bash", "python", "submit")]), trajectory_id="t", sandbox=sandbox
    )
    bash = await tools.execute(ToolCall("1", "bash", {"command": "echo hi; exit 2"}))
    assert bash.is_error and bash.content == "hi\n[exit code 2]"
    py = await tools.execute(ToolCall("2", "python", {"code": "print('a \"quoted\" $HOME')"}))
    assert not py.is_error and py.content == 'a "quoted" $HOME'
    sub = await tools.execute(ToolCall("3", "submit", {"answer": "42"}))
    assert sub.metadata == {"submitted": True, "answer": "42"} and not sub.is_error


async def test_tools_without_sandbox_say_so() -> None:
    import agentrl.tools.builtin  # noqa: F401

    tools = ToolSet(build_tools([{"class": "bash"}, {"class": "editor"}]), trajectory_id="t")
    result = await tools.execute(ToolCall("1", "bash", {"command": "ls"}))
    assert result.is_error and "needs a sandbox" in result.content and "sandbox.backend" in result.content


def test_exec_result_ok() -> None:
    assert ExecResult(0, "", "").ok and not ExecResult(0, "", "", timed_out=True).ok
