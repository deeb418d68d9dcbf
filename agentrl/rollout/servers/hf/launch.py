"""Start the `hf` server as a subprocess and wait until `/health` answers."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from agentrl.rollout.servers.hf.push import WEIGHTS_TOKEN_ENV, is_loopback
from agentrl.rollout.servers.process import ServerStartError, free_port, wait_for_health


@dataclass
class HFServerHandle:
    """A running `hf` server subprocess: its `process`, base `url` and log file. Use `stop()` or `with`."""

    process: subprocess.Popen[bytes]
    url: str
    port: int
    log_path: Path
    _log: IO[bytes] | None = field(default=None, repr=False)
    weights_token: str | None = field(default=None, repr=False)
    """The token the server takes weights with (set when it listens beyond this machine)."""

    def alive(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, chars: int = 4000) -> str:
        """The end of the server's combined stdout/stderr."""
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self, timeout: float = 15.0) -> None:
        """Terminate the server (SIGTERM, then SIGKILL after `timeout` seconds)."""
        if self.alive():
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> HFServerHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def launch_hf_server(
    model: str,
    port: int | None = None,
    *,
    host: str = "127.0.0.1",
    max_batch_size: int = 64,
    dtype: str = "float32",
    device: str | None = None,
    max_model_len: int | None = None,
    extra_args: list[str] | None = None,
    env: dict[str, str] | None = None,
    startup_timeout: float = 300.0,
    log_path: str | Path | None = None,
) -> HFServerHandle:
    """Start `python -m agentrl.rollout.servers.hf` and return once `/health` answers 200.

    `port=None` picks a free port. A server on a `host` other hosts can reach takes weights only with a token
    (AGENTRL_WEIGHTS_TOKEN, else a new one, kept on the handle). The server's output goes to `log_path` (a temp
    file by default). Raises `RuntimeError` with the log tail if the process exits or does not become healthy in
    `startup_timeout`.
    """
    port = port or free_port(host)
    cmd = [sys.executable, "-m", "agentrl.rollout.servers.hf", "--model", model, "--host", host]
    cmd += ["--port", str(port), "--max-batch-size", str(max_batch_size), "--dtype", dtype]
    if device:
        cmd += ["--device", device]
    if max_model_len:
        cmd += ["--max-model-len", str(max_model_len)]
    cmd += extra_args or []
    path = Path(log_path) if log_path else Path(tempfile.mkstemp(prefix="agentrl-hf-", suffix=".log")[1])
    log = path.open("wb")
    proc_env = {"HF_HUB_OFFLINE": "1", **os.environ, **(env or {})}
    token = proc_env.get(WEIGHTS_TOKEN_ENV) or None
    if token is None and not is_loopback(host):  # reachable from other hosts: weights only with a secret
        token = proc_env[WEIGHTS_TOKEN_ENV] = secrets.token_hex(16)
    process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=proc_env)
    handle = HFServerHandle(process, f"http://{host}:{port}", port, path, log, weights_token=token)
    try:
        _wait_healthy(handle, startup_timeout)
    except BaseException:
        handle.stop()
        raise
    return handle


def _wait_healthy(handle: HFServerHandle, timeout: float) -> None:
    def alive() -> None:
        if not handle.alive():
            raise RuntimeError(f"hf server exited with code {handle.process.returncode}:\n{handle.log_tail()}")

    try:
        wait_for_health(handle.url, timeout, alive=alive, interval=0.25)
    except ServerStartError:
        raise RuntimeError(f"hf server not healthy after {timeout:.0f}s:\n{handle.log_tail()}") from None
