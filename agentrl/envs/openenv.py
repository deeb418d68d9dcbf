"""OpenEnv environment servers, started by agentrl where the environment says how (the loop is
`agentrl.loops.openenv`).

An OpenEnv environment is a server (openenv-core's `create_app`: reset / step / state over a WebSocket). Three ways
to name one, `agent.kwargs`:

- `env_dir: path/to/my_env`: an environment folder; its `openenv.yaml` names the ASGI app (`app: server.app:app`),
  which agentrl serves with uvicorn from that folder, in the run's own Python, on a free local port;
- `app: my_pkg.server:app`: an installed app, served the same way;
- `base_url: http://host:port`: a server already running (a container, a Hugging Face Space).

A server agentrl starts is started once per process, on the first episode, and stopped when the process exits. It
starts in a thread of its own: while it comes up (up to 60 s), the event loop's other episodes go on, and the
episodes that ask for it meanwhile wait for that one start.
(Starting the environment's Docker image, as openenv's `from_docker_image` does, is not offered: this machine
cannot pull or build the images OpenEnv environments ship.)
"""

from __future__ import annotations

import asyncio
import atexit
import os
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import httpx
import yaml

from agentrl.errors import UserError
from agentrl.registry import import_package

_STARTS: dict[str, Future[OpenEnvServer]] = {}
_LOCK = threading.Lock()


def import_openenv() -> Any:
    return import_package("openenv.core", "openenv-core", "agent.name=openenv")


class OpenEnvServer:
    """An OpenEnv app served by uvicorn in a child process (see the module docstring)."""

    def __init__(self, app: str, cwd: Path | None = None, start_timeout_s: float = 60.0):
        self.app, self.cwd, self.start_timeout_s = app, cwd, start_timeout_s
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = Path(os.environ.get("TMPDIR", "/tmp")) / f"agentrl-openenv-{self.port}.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> str:
        """Start the server and wait until it is healthy (blocking: `server_url` runs it in a thread).

        Raises:
            UserError: the server exited, or was not healthy within `start_timeout_s` (the end of its log named).
        """
        command = [sys.executable, "-m", "uvicorn", self.app, "--host", "127.0.0.1", "--port", str(self.port)]
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(command, cwd=self.cwd, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise UserError(f"the OpenEnv server {self.app} exited at start; its log: {self._tail()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=2.0).status_code == 200:
                    return self.url
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        self.stop()
        raise UserError(
            f"the OpenEnv server {self.app} was not healthy after {self.start_timeout_s:.0f}s: {self._tail()}"
        )

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()

    def _tail(self) -> str:
        return self.log.read_text(errors="replace")[-2000:] if self.log.exists() else "(no log)"


async def server_url(env_dir: str | None, app: str | None, base_url: str | None) -> str:
    """The URL of the environment's server, starting it on the first call for `env_dir` or `app` without blocking
    the event loop (a start that failed is tried again by the next call).

    Raises:
        UserError: the server could not be started (see `OpenEnvServer.start`).
    """
    if base_url:
        return base_url.rstrip("/")
    app_path, cwd = app_of(env_dir, app)
    server = await asyncio.wrap_future(_start_once(f"{cwd}:{app_path}", app_path, cwd))
    return server.url


def _start_once(key: str, app: str, cwd: Path | None) -> Future[OpenEnvServer]:
    """The one start of the server for `key`: begun in a thread on the first call, shared by the calls after."""
    with _LOCK:
        start = _STARTS.get(key)
        if start is None or (start.done() and start.exception() is not None):
            start = _STARTS[key] = Future()
            start.set_running_or_notify_cancel()  # an episode cancelled while it waits leaves the start to the others
            threading.Thread(target=_start, args=(start, app, cwd), name=f"openenv-{app}", daemon=True).start()
        return start


def _start(done: Future[OpenEnvServer], app: str, cwd: Path | None) -> None:
    server = OpenEnvServer(app, cwd)
    atexit.register(server.stop)
    try:
        server.start()
    except BaseException as exc:  # passed on to every episode that waits for this start
        done.set_exception(exc)
    else:
        done.set_result(server)


def app_of(env_dir: str | None, app: str | None) -> tuple[str, Path | None]:
    """The ASGI app to serve and the folder to serve it from (an environment folder's `openenv.yaml` says)."""
    if app:
        return app, Path(env_dir) if env_dir else None
    folder = Path(env_dir or ".")
    spec_file = folder / "openenv.yaml"
    if not spec_file.is_file():
        raise UserError(f"agent.kwargs.env_dir: {folder} has no openenv.yaml (an OpenEnv environment folder has one)")
    spec = yaml.safe_load(spec_file.read_text()) or {}
    return str(spec.get("app") or "server.app:app"), folder


def openenv_problems(env_dir: str | None, app: str | None, base_url: str | None) -> list[str]:
    """What stops the environment from being served (a missing package, no or a bad way to reach it)."""
    try:
        import_openenv()
    except UserError as exc:
        return [str(exc)]
    if sum(x is not None for x in (app or env_dir, base_url)) != 1:
        return [
            "agent.kwargs: name the OpenEnv environment by one of env_dir (a folder with openenv.yaml), app "
            "(module:app) or base_url (a running server)"
        ]
    if base_url is None and app is None:
        try:
            app_of(env_dir, None)
        except UserError as exc:
            return [str(exc)]
    return []


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


__all__ = ["OpenEnvServer", "app_of", "openenv_problems", "server_url"]
