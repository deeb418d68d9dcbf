"""The client of Harbor's verifier process (`agentrl.harbor.verify_client`), against a stand-in server that
speaks its protocol (`fake_harbor_verify_server.py`): the server's questions run on the episode's sandbox, one
process serves every verification, a process that dies is reported with its words and replaced, and a cancelled
verification stops the command it was running. Harbor's own server, for real:
tests/integration/test_harbor_package_real.py."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentrl.harbor import verify_client
from agentrl.harbor.verify_client import harbor_verifier
from agentrl.sandbox.local import LocalSandbox

FAKE = Path(__file__).with_name("fake_harbor_verify_server.py")


@pytest.fixture
def fake_server(monkeypatch):
    def start(mode: str) -> None:
        monkeypatch.setenv("FAKE_HARBOR_MODE", mode)
        monkeypatch.setenv("AGENTRL_HARBOR_PYTHON", sys.executable)
        monkeypatch.setattr(verify_client, "SERVER", FAKE)
        monkeypatch.setattr(verify_client, "_process", None)

    yield start
    if verify_client._process is not None:
        verify_client._process.close()


def still_sleeping() -> bool:
    return subprocess.run(["pgrep", "-f", "sleep 30; touch late"], capture_output=True, check=False).returncode == 0


def verify(sandbox, tmp_path, timeout_s=10.0):
    return harbor_verifier().verify(sandbox, tmp_path / "task", tmp_path / "trial", timeout_s)


def test_the_servers_commands_run_on_the_episodes_sandbox_in_one_process(fake_server, tmp_path) -> None:
    fake_server("serve")

    async def play():
        async with LocalSandbox() as one, LocalSandbox() as two:
            done = [await verify(one, tmp_path), await verify(two, tmp_path)]  # the stand-in answers one at a time
            return done, [Path(one.workdir, "logs", "reward.txt").is_file()]

    (first, second), files = asyncio.run(play())
    pid = harbor_verifier().process.pid
    assert first.rewards == second.rewards == {"reward": 0.5, "said": 4} and first.error is None
    assert first.exit_code == 0 and not first.timed_out and files == [True]
    again = asyncio.run(play())[0][0]  # another event loop, the same process
    assert again.rewards == first.rewards and harbor_verifier().process.pid == pid


def test_a_server_that_dies_is_reported_with_its_words_and_replaced(fake_server, tmp_path) -> None:
    fake_server("die")

    async def play():
        async with LocalSandbox() as sandbox:
            return await verify(sandbox, tmp_path)

    done = asyncio.run(play())
    assert done.rewards is None and "Harbor's verifier process exited (harbor: broken install)" in done.error
    dead = verify_client._process
    assert dead is not None and dead.process.wait(timeout=10) == 1
    assert harbor_verifier() is not dead and harbor_verifier().alive


def test_a_cancelled_verification_stops_the_command_it_was_running(fake_server, tmp_path) -> None:
    fake_server("hang")

    async def play():
        async with LocalSandbox() as sandbox:
            running = asyncio.ensure_future(verify(sandbox, tmp_path))
            await asyncio.sleep(1.0)
            started = time.perf_counter()
            running.cancel()
            with pytest.raises(asyncio.CancelledError):
                await running
            await asyncio.sleep(0.5)
            return time.perf_counter() - started, still_sleeping()

    took, sleeping = asyncio.run(play())
    assert took < 5 and not sleeping and not harbor_verifier().verifications


def test_a_verification_past_its_deadline_is_timed_out(fake_server, tmp_path, monkeypatch) -> None:
    fake_server("hang")
    monkeypatch.setattr(verify_client, "GRACE_S", 0.5)

    async def play():
        async with LocalSandbox() as sandbox:
            return await verify(sandbox, tmp_path, timeout_s=1.0)

    done = asyncio.run(play())
    assert done.timed_out and done.rewards is None
