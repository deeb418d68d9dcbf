"""Run an HTTP server as a subprocess: start it, wait for its health endpoint, stop it.

Generic over the engine (vLLM, SGLang, anything with a `/health` route): the command, its environment and the
log file are the caller's. The child runs in its own process group (`start_new_session`), so `stop()` also ends
the engine's own workers (vLLM's EngineCore, SGLang's scheduler) and nothing is left behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx

from agentrl.rollout.errors import RolloutError
from agentrl.weights_token import bearer_headers


class ServerStartError(RolloutError):
    """A server subprocess died or did not become healthy in time; the message ends with its log tail."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on `host` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def shm_dir() -> str | None:
    """`/dev/shm` when it is writable (weights handed over in RAM), else None (the system's temp folder)."""
    return "/dev/shm" if os.access("/dev/shm", os.W_OK) else None


def is_healthy(
    base_url: str, health_path: str = "/health", timeout: float = 2.0, client: httpx.Client | None = None
) -> bool:
    """Whether `GET {base_url}{health_path}` answers 200 now (through `client`, when given: a poll's own)."""
    try:
        get = client.get if client is not None else httpx.get
        return get(base_url.rstrip("/") + health_path, timeout=timeout).status_code == 200
    except httpx.HTTPError:
        return False


def wait_for_health(
    base_url: str,
    timeout: float,
    *,
    health_path: str = "/health",
    alive: Callable[[], None] | None = None,
    interval: float = 0.5,
) -> None:
    """Poll `{base_url}{health_path}` until it answers 200.

    Args:
        base_url: Server base URL, `http://host:port`.
        timeout: Seconds to wait in all.
        health_path: Health route.
        alive: Called between polls; raises when the server process is gone (see `ServerProcess`).
        interval: Seconds between polls.

    Raises:
        ServerStartError: The server did not answer in time (or `alive` raised it).
    """
    deadline = time.monotonic() + timeout
    with httpx.Client() as client:  # one client: each new one loads the CA bundle (~40 ms of CPU)
        while time.monotonic() < deadline:
            if alive is not None:
                alive()
            if is_healthy(base_url, health_path, client=client):
                return
            time.sleep(interval)
    raise ServerStartError(f"server at {base_url} did not answer {health_path} within {timeout:.0f} s")


class ServerProcess:
    """A server subprocess in its own process group, its stdout and stderr in a log file.

    Args:
        cmd: The command line.
        env: Variables added to (or replacing those of) this process's environment.
        log_path: Where its output goes; when omitted, a temporary file that `stop()` deletes.
        name: Short name used in messages (`vllm`, `sglang`).
        secrets: Strings of `cmd` that messages show as `***` (a token passed as a flag).
    """

    def __init__(
        self,
        cmd: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        log_path: str | Path | None = None,
        name: str = "server",
        secrets: Sequence[str] = (),
    ) -> None:
        self.cmd = list(cmd)
        self._secrets = tuple(s for s in secrets if s)
        self.env = dict(env or {})
        self.name = name
        self._owns_log = log_path is None
        if log_path is None:
            fd, log_path = tempfile.mkstemp(prefix=f"agentrl-{name}-", suffix=".log")
            os.close(fd)
        self.log_path = Path(log_path)
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        """Process id of the server (the leader of its process group), once started."""
        return self._proc.pid if self._proc else None

    @property
    def running(self) -> bool:
        """Whether the server process is started and has not exited."""
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        """Start the process (no wait; see `wait_healthy`)."""
        if self.running:
            return
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self._proc = subprocess.Popen(
                self.cmd,
                env={**os.environ, **self.env},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def check_alive(self) -> None:
        """Raise `ServerStartError`, with the log tail, if the process has exited."""
        if self._proc is None:
            raise ServerStartError(f"{self.name} server was never started")
        code = self._proc.poll()
        if code is not None:
            raise ServerStartError(
                f"{self.name} server exited with status {code} during startup; "
                f"command: {self.shown_cmd()}\n{self._tail_note()}"
            )

    def wait_healthy(self, base_url: str, timeout: float, health_path: str = "/health") -> None:
        """Wait until the server answers its health route; stop it and raise if it dies or times out."""
        try:
            wait_for_health(base_url, timeout, health_path=health_path, alive=self.check_alive)
        except ServerStartError as e:
            died = self._proc is not None and self._proc.poll() is not None
            message = str(e) if died else f"{e}; {self.name} command: {self.shown_cmd()}\n" + self._tail_note()
            self.stop()
            raise ServerStartError(message) from None

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM the whole process group, then SIGKILL it if it outlives `timeout` seconds."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        _signal_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        # Workers of the group may outlive the leader for a moment: make sure none is left.
        _signal_group(proc.pid, signal.SIGKILL)
        if self._owns_log:
            self.log_path.unlink(missing_ok=True)

    def shown_cmd(self) -> str:
        """The command line as messages show it: its secrets as `***`."""
        text = " ".join(self.cmd)
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def log_tail(self, lines: int = 40) -> str:
        """The last `lines` lines of the server's log."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def _tail_note(self) -> str:
        """The log tail, headed by where the whole log is (while it still exists)."""
        where = "" if self._owns_log else f" of {self.log_path}"
        return f"--- last lines{where} ---\n{self.log_tail()}"

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    """Send `sig` to process group `pgid`, ignoring a group that is already gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def apply_overrides(config: Any, overrides: Mapping[str, Any]) -> None:
    """Set dataclass config fields from keyword overrides (None leaves a field as it is)."""
    for key, value in overrides.items():
        if not hasattr(config, key):
            raise TypeError(f"unknown {type(config).__name__} field {key!r}")
        if value is not None:
            setattr(config, key, value)


class ManagedServer:
    """An engine's HTTP server, launched here (with a `ServerProcess`) or already running (`connect`).

    Attributes:
        base_url: `http://host:port` of the server (also `url`).
        model_path: The served model folder, when known.
        policy_version: Version of the weights being served, as set by the backend's `update_weights`.
        token: The weights token its control routes take (None: AGENTRL_WEIGHTS_TOKEN, if set; see
            `agentrl.weights_token`).
    """

    def __init__(
        self,
        base_url: str,
        *,
        model_path: str | None = None,
        process: ServerProcess | None = None,
        token: str | None = None,
    ):
        self.base_url = base_url.rstrip("/")
        self.model_path = model_path
        self.process = process
        self.policy_version = 0
        self.token = token

    @property
    def url(self) -> str:  # alias of `base_url`
        return self.base_url

    @classmethod
    def start_process(
        cls,
        cmd: Sequence[str],
        *,
        host: str,
        port: int,
        model_path: str,
        env: Mapping[str, str],
        log_path: str | None,
        name: str,
        startup_timeout: float,
        token: str | None = None,
    ) -> Self:
        """Run `cmd` and return the server once its `/health` answers (`ServerStartError` with its log if not);
        `token` guards its control routes (never shown in messages)."""
        process = ServerProcess(cmd, env=env, log_path=log_path, name=name, secrets=[token] if token else [])
        process.start()
        server = cls(f"http://{host}:{port}", model_path=model_path, process=process, token=token)
        process.wait_healthy(server.base_url, startup_timeout)
        return server

    @classmethod
    def connect(cls, url: str, *, model_path: str | None = None, timeout: float = 60.0) -> Self:
        """Use a running server; `model_path` (its model folder) enables checks of weight updates."""
        wait_for_health(url.rstrip("/"), timeout)
        return cls(url, model_path=model_path)

    def stop(self) -> None:
        """Stop the server if it was launched here (a connected server is left running)."""
        if self.process is not None:
            self.process.stop()

    def healthy(self, timeout: float = 2.0) -> bool:
        """Whether the server answers its health route now."""
        return is_healthy(self.base_url, timeout=timeout)

    def served_version(self) -> int | None:
        """The policy version the server itself says it serves (None: it cannot say).

        Raises:
            httpx.HTTPError: the server did not answer.
        """
        return None

    def abort(self, timeout: float = 30.0) -> int:
        """Abort every request in flight (they end with `finish_reason: abort`); returns how many, when known.

        Raises:
            httpx.HTTPError: the server did not answer or refused.
        """
        path, body = self.abort_route
        response = httpx.post(self.base_url + path, json=body, headers=self.auth_headers(), timeout=timeout)
        response.raise_for_status()
        answer = response.json() if response.content else {}
        return int(answer.get("aborted", 0)) if isinstance(answer, dict) else 0

    def auth_headers(self) -> dict[str, str]:
        """The `Authorization` header of its control routes (`token`, else AGENTRL_WEIGHTS_TOKEN), if any."""
        return bearer_headers(self.token)

    def http(self, timeout: float | None = 5.0) -> httpx.Client:
        """A client on the server that sends `auth_headers` (per-call timeouts override `timeout`)."""
        return httpx.Client(base_url=self.base_url, headers=self.auth_headers(), timeout=timeout)

    weights_via = "file"
    """New weights reach the server as a safetensors file (by path, or uploaded: see `update_weights`)."""

    abort_route: tuple[str, dict[str, Any]] = ("/v1/abort", {})
    """The backend's abort-everything route and body."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
