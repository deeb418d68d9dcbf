"""Harbor's verifier for agentrl's sandboxes: one long-lived `verify_server.py` process per agentrl process.

A verification sends the task folder to the server, which runs Harbor's public `Verifier.verify()`; each
command and copy Harbor does on its environment comes back here and runs on the episode's `Sandbox`, under the
verification's deadline. The server is started by the first verification and serves every episode after it,
whichever event loop they run on (a reader thread routes each question to its episode's loop); it is restarted
when it died, and stopped when this process exits.

Harbor's `user=` on a command is not honoured: agentrl's sandboxes run every command as the container's user,
as agentrl's own verifier does.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import concurrent.futures
import contextlib
import itertools
import json
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentrl.harbor.package import INSTALL_HINT, HarborPackageError, harbor_python
from agentrl.sandbox.base import ExecResult, Sandbox

SERVER = Path(__file__).with_name("verify_server.py")
GRACE_S = 60.0  # past the tests' timeout, what Harbor may take to download and parse before it is given up
COPY_TIMEOUT_S = 60.0


@dataclass
class HarborVerification:
    """What Harbor's verifier made of one run of the tests.

    Attributes:
        rewards: Harbor's `VerifierResult.rewards`, or None with `error`.
        error: Harbor's complaint (no reward file, a malformed one), or why the verification did not finish.
        exit_code: the exit status of the last command Harbor ran before downloading the logs (test.sh's).
        timed_out: a command ran past the verification's deadline.
    """

    rewards: dict[str, float] | None = None
    error: str | None = None
    exit_code: int = -1
    timed_out: bool = False


@dataclass
class _Verification:
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[dict[str, Any]]
    sandbox: Sandbox
    deadline: float
    outcome: HarborVerification = field(default_factory=HarborVerification)
    calls: set[concurrent.futures.Future[None]] = field(default_factory=set)


class HarborVerifierProcess:
    """The server process, its reader threads and the verifications in flight."""

    def __init__(self, python: str):
        self.process = subprocess.Popen(
            [python, str(SERVER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, bufsize=1,
        )  # fmt: skip
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=20)
        self.verifications: dict[int, _Verification] = {}
        self._ids = itertools.count(1)
        self._write = threading.Lock()
        threading.Thread(target=self._read_answers, name="harbor-verifier", daemon=True).start()
        threading.Thread(target=self._read_stderr, name="harbor-verifier-stderr", daemon=True).start()

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    async def verify(self, sandbox: Sandbox, task_dir: Path, trial_dir: Path, timeout_s: float) -> HarborVerification:
        """Run Harbor's verifier for the task folder `task_dir` on `sandbox`; Harbor's files land in `trial_dir`."""
        loop = asyncio.get_running_loop()
        ident = next(self._ids)
        job = _Verification(loop, loop.create_future(), sandbox, loop.time() + timeout_s)
        self.verifications[ident] = job
        try:
            self._send({"op": "verify", "id": ident, "task": str(task_dir), "trial_dir": str(trial_dir)})
            answer = await asyncio.wait_for(asyncio.shield(job.future), timeout_s + GRACE_S)
        except TimeoutError:
            self._give_up(ident, job)
            job.outcome.timed_out = True
            answer = {"error": f"Harbor's verifier did not answer within {timeout_s + GRACE_S:g}s"}
        except asyncio.CancelledError:
            self._give_up(ident, job)
            raise
        finally:
            self.verifications.pop(ident, None)
        job.outcome.rewards = answer.get("rewards")
        job.outcome.error = answer.get("error")
        return job.outcome

    def close(self) -> None:
        """End the server (it exits when its input closes); kill it if it does not within 5 s."""
        with contextlib.suppress(OSError):
            self.process.stdin.close()  # type: ignore[union-attr]
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def _send(self, message: dict[str, Any]) -> None:
        line = json.dumps(message) + "\n"
        with self._write:
            try:
                self.process.stdin.write(line)  # type: ignore[union-attr]
                self.process.stdin.flush()  # type: ignore[union-attr]
            except (OSError, ValueError) as exc:
                raise HarborPackageError(f"Harbor's verifier process is gone ({exc}): {self._died()}") from None

    def _give_up(self, ident: int, job: _Verification) -> None:
        """Stop the server's verification and the sandbox commands it is waiting on."""
        for call in list(job.calls):
            call.cancel()
        with contextlib.suppress(HarborPackageError):
            self._send({"op": "cancel", "id": ident})

    def _read_answers(self) -> None:
        for line in self.process.stdout:  # type: ignore[union-attr]
            message = json.loads(line)
            job = self.verifications.get(message["id"])
            if job is None:
                continue  # given up on (timed out, cancelled)
            try:
                if "call" in message:
                    call = asyncio.run_coroutine_threadsafe(self._answer_call(job, message), job.loop)
                    job.calls.add(call)
                    call.add_done_callback(job.calls.discard)
                else:
                    job.loop.call_soon_threadsafe(_settle, job.future, message)
            except RuntimeError:  # its event loop is closed: nobody waits for this verification any more
                self.verifications.pop(message["id"], None)
        for job in list(self.verifications.values()):
            with contextlib.suppress(RuntimeError):
                job.loop.call_soon_threadsafe(_settle, job.future, {"error": self._died()})

    def _read_stderr(self) -> None:
        for line in self.process.stderr:  # type: ignore[union-attr]
            self.stderr_tail.append(line.rstrip())

    def _died(self) -> str:
        tail = " / ".join(list(self.stderr_tail)[-3:]) or "no output"
        return f"Harbor's verifier process exited ({tail}); {INSTALL_HINT}"

    async def _answer_call(self, job: _Verification, call: dict[str, Any]) -> None:
        try:
            reply = {"reply": call["call"], "result": await _SANDBOX_OPS[call["op"]](job, call)}
        except Exception as exc:
            reply = {"reply": call["call"], "error": f"{type(exc).__name__}: {exc}"}
        with contextlib.suppress(HarborPackageError):  # the server died: the reader thread reports it
            self._send(reply)


def _settle(future: asyncio.Future[dict[str, Any]], message: dict[str, Any]) -> None:
    if not future.done():
        future.set_result(message)


async def _exec(job: _Verification, call: dict[str, Any]) -> dict[str, Any]:
    remaining = max(job.deadline - job.loop.time(), 1.0)
    timeout = min(remaining, call["timeout_sec"]) if call.get("timeout_sec") else remaining
    result: ExecResult = await job.sandbox.exec(call["command"], timeout=timeout, workdir=call.get("cwd"),
                                                env=call.get("env") or None)  # fmt: skip
    job.outcome.exit_code = result.exit_code
    job.outcome.timed_out |= result.timed_out
    return {"stdout": result.stdout, "stderr": result.stderr, "return_code": result.exit_code}


async def _upload_file(job: _Verification, call: dict[str, Any]) -> None:
    source = Path(call["source"])
    await job.sandbox.write_file(call["target"], source.read_bytes(), mode=source.stat().st_mode & 0o777)


async def _upload_dir(job: _Verification, call: dict[str, Any]) -> None:
    await job.sandbox.upload_dir(call["source"], call["target"])


async def _download_file(job: _Verification, call: dict[str, Any]) -> None:
    target = Path(call["target"])
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(await job.sandbox.read_file(call["source"]))


async def _download_dir(job: _Verification, call: dict[str, Any]) -> None:
    source, target = call["source"].rstrip("/"), Path(call["target"])
    listing = await job.sandbox.exec(f"find '{source}' -type f -print0", timeout=COPY_TIMEOUT_S)
    if listing.exit_code != 0:
        raise FileNotFoundError(f"cannot list {source}: {listing.stderr.strip()}")
    for path in filter(None, listing.stdout.split("\0")):
        local = target / Path(path).relative_to(source)
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_bytes(await job.sandbox.read_file(path))


_SANDBOX_OPS = {
    "exec": _exec, "upload_file": _upload_file, "upload_dir": _upload_dir,
    "download_file": _download_file, "download_dir": _download_dir,
}  # fmt: skip

_process: HarborVerifierProcess | None = None
_starting = threading.Lock()


def harbor_verifier() -> HarborVerifierProcess:
    """This process's Harbor verifier server, started (or restarted, when it died) on first use.

    Raises:
        HarborPackageError: no Python has the `harbor` package.
    """
    global _process
    with _starting:
        if _process is None or not _process.alive:
            python = harbor_python()
            if python is None:
                raise HarborPackageError(f"verifying a task read by Harbor's package needs it: {INSTALL_HINT}")
            _process = HarborVerifierProcess(python)
        return _process


@atexit.register
def _stop_server() -> None:
    if _process is not None and _process.alive:
        _process.close()
