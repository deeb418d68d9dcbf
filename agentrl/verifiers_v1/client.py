"""agentrl's side of `episode_server.py`: one-shot questions (a taskset's tasks, what stops it loading) and the
long-lived process that plays episodes, started on first use and restarted when it died."""

from __future__ import annotations

import asyncio
import atexit
import collections
import contextlib
import itertools
import json
import os
import subprocess
import threading
from pathlib import Path
from typing import Any

from agentrl.verifiers_v1.install import VerifiersInstallError, require_verifiers_python

SERVER = Path(__file__).with_name("episode_server.py")
QUESTION_TIMEOUT_S = 300.0  # loading a taskset may read a dataset from disk


class EpisodeServerError(RuntimeError):
    """The episode server failed or exited."""


def ask(command: str, request: dict[str, Any]) -> Any:
    """`episode_server.py command request`'s answer (`tasks`, `check`), run by verifiers' interpreter."""
    python = require_verifiers_python()
    done = subprocess.run(
        [python, str(SERVER), command, json.dumps(request)],
        capture_output=True, text=True, timeout=QUESTION_TIMEOUT_S, check=False, env=server_env(python),
    )  # fmt: skip
    if done.returncode != 0 or not done.stdout.strip():
        raise VerifiersInstallError(f"verifiers 0.4 could not answer `{command}`: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def server_env(python: str) -> dict[str, str]:
    """This process's environment with verifiers' interpreter's folder first on PATH: its harnesses run `uv`."""
    folder = str(Path(python).parent)
    return {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"}


class EpisodeServer:
    """The serving process, the reader threads and the episodes in flight (answered by id)."""

    def __init__(self, python: str):
        self.process = subprocess.Popen(
            [python, str(SERVER), "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, bufsize=1, env=server_env(python),
        )  # fmt: skip
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=30)
        self.waiting: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Future[dict[str, Any]]]] = {}
        self._ids = itertools.count(1)
        self._write = threading.Lock()
        self._stderr = threading.Thread(target=self._read_stderr, name="verifiers-episodes-stderr", daemon=True)
        self._stderr.start()
        threading.Thread(target=self._read_answers, name="verifiers-episodes", daemon=True).start()

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    async def episode(self, request: dict[str, Any]) -> dict[str, Any]:
        """Play one episode (`request`: env, path, task, base_url, model); its verdict (rewards, metrics, errors).

        Raises:
            EpisodeServerError: verifiers failed to play it (the task is missing, the environment did not load) or
                the process exited.
        """
        loop = asyncio.get_running_loop()
        ident = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = loop.create_future()
        self.waiting[ident] = (loop, future)
        try:
            self._send({**request, "id": ident})
            answer = await future
        finally:
            self.waiting.pop(ident, None)
        if "error" in answer:
            raise EpisodeServerError(f"verifiers 0.4 could not play the episode: {answer['error']}")
        return answer["result"]

    def close(self) -> None:
        """End the server (it exits when its input closes); kill it if it does not within 10 s."""
        with contextlib.suppress(OSError, ValueError):
            self.process.stdin.close()  # type: ignore[union-attr]
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def _send(self, message: dict[str, Any]) -> None:
        with self._write:
            try:
                self.process.stdin.write(json.dumps(message) + "\n")  # type: ignore[union-attr]
                self.process.stdin.flush()  # type: ignore[union-attr]
            except (OSError, ValueError) as exc:
                raise EpisodeServerError(f"the verifiers episode server is gone ({exc}): {self._died()}") from None

    def _read_answers(self) -> None:
        for line in self.process.stdout:  # type: ignore[union-attr]
            message = json.loads(line)
            self._settle(message["id"], message)
        for ident in list(self.waiting):
            self._settle(ident, {"error": self._died()})

    def _settle(self, ident: int, message: dict[str, Any]) -> None:
        if (waiting := self.waiting.get(ident)) is None:
            return  # cancelled meanwhile
        loop, future = waiting
        with contextlib.suppress(RuntimeError):  # its event loop is closed: nobody waits any more
            loop.call_soon_threadsafe(lambda: future.done() or future.set_result(message))

    def _read_stderr(self) -> None:
        for line in self.process.stderr:  # type: ignore[union-attr]
            self.stderr_tail.append(line.rstrip())

    def _died(self) -> str:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)  # its exit status and last words, once its output has closed
        self._stderr.join(timeout=2)
        tail = " / ".join(list(self.stderr_tail)[-5:]) or "no output"
        return f"the process exited with {self.process.poll()} ({tail})"


_server: EpisodeServer | None = None
_starting = threading.Lock()


def episode_server() -> EpisodeServer:
    """This process's episode server, started (or restarted, when it died) on first use.

    Raises:
        VerifiersInstallError: no interpreter has verifiers 0.4.
    """
    global _server
    with _starting:
        if _server is None or not _server.alive:
            _server = EpisodeServer(require_verifiers_python())
        return _server


@atexit.register
def _stop_server() -> None:
    if _server is not None and _server.alive:
        _server.close()
