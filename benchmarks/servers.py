"""Rollout servers for the benchmarks, started and always stopped (also on Ctrl-C during start-up), as handles.

`hf_server` and `vllm_server` run on this machine; `hf_server_in_docker` runs the built-in server in a container
of the sandbox image on this checkout's venv and model (mounted read-only): a server that shares no filesystem
with the caller, as one on another host would.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agentrl.rollout.handles import HFServer
from agentrl.rollout.servers.vllm import VLLMServer

REPO = Path(__file__).resolve().parent.parent
Log = Callable[[str], None]


def _say(message: str) -> None:
    print(message, flush=True)


@contextmanager
def hf_server(
    model_path: str,
    max_model_len: int = 512,
    extra_args: Sequence[str] = (),
    log: Log = _say,
    dtype: str = "float32",
) -> Iterator[HFServer]:
    """The built-in server on this machine (`extra_args`: more of its flags, e.g. `--num-threads 1`)."""
    from agentrl.rollout.servers.hf.launch import launch_hf_server

    started = time.perf_counter()
    process = launch_hf_server(model_path, max_model_len=max_model_len, extra_args=list(extra_args), dtype=dtype)
    try:
        log(f"hf server up at {process.url} in {time.perf_counter() - started:.0f} s")
        yield HFServer(process.url, model_path=model_path, process=process)
    finally:
        process.stop()


@contextmanager
def vllm_server(model_path: str, max_model_len: int = 512, log: Log = _say) -> Iterator[VLLMServer]:
    """vLLM on this machine: `VLLMServer.launch` unrolled so that an interrupted start-up still stops it."""
    from agentrl.rollout.servers.process import ServerProcess, free_port
    from agentrl.rollout.servers.vllm import VLLMConfig, build_command, build_env, vllm_python

    cfg = VLLMConfig(max_model_len=max_model_len)
    host, port = "127.0.0.1", free_port()
    cmd = build_command(vllm_python(cfg.python), model_path, port, host, cfg)
    process = ServerProcess(cmd, env=build_env(cfg), name="vllm")
    url = f"http://{host}:{port}"
    started = time.perf_counter()
    try:
        process.start()
        process.wait_healthy(url, cfg.startup_timeout)
        log(f"vllm server up at {url} in {time.perf_counter() - started:.0f} s")
        yield VLLMServer(url, model_path=model_path, process=process)
    finally:
        process.stop()


@contextmanager
def hf_server_in_docker(
    model_path: str,
    max_model_len: int = 512,
    labels: Mapping[str, str] | None = None,
    log: Log = _say,
    dtype: str = "float32",
    network: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Iterator[HFServer]:
    """The built-in server in its own container (own `/dev/shm`), reached on a published localhost port (or, on
    a Docker `network`, at its address there); it listens beyond its container, so it takes weights with a token
    (the handle holds it)."""
    import secrets

    import docker

    from agentrl.rollout.servers.process import free_port, wait_for_health
    from agentrl.sandbox.images import BASE_IMAGE

    port = free_port()
    mounts = {str(p): {"bind": str(p), "mode": "ro"} for p in (Path(sys.base_prefix).resolve(), REPO, Path(model_path))}
    command = [str(REPO / ".venv" / "bin" / "python"), "-m", "agentrl.rollout.servers.hf", "--model", model_path]
    command += ["--host", "0.0.0.0", "--port", "8000", "--max-model-len", str(max_model_len), "--dtype", dtype]
    token = secrets.token_hex(16)
    container = docker.from_env().containers.run(
        BASE_IMAGE,
        command,
        detach=True,
        ports={"8000/tcp": ("127.0.0.1", port)},
        volumes=mounts,
        environment={
            "HF_HUB_OFFLINE": "1",
            "HF_HOME": "/tmp/hf",
            "OMP_WAIT_POLICY": "PASSIVE",
            "AGENTRL_WEIGHTS_TOKEN": token,
            **(env or {}),
        },
        labels=dict(labels or {}),
        **({"network": network} if network else {}),
    )
    url = f"http://127.0.0.1:{port}"
    if network:  # reached at its address on that network (which a test can cut it off from)
        container.reload()
        url = f"http://{container.attrs['NetworkSettings']['Networks'][network]['IPAddress']}:8000"
    started = time.perf_counter()
    try:
        try:
            wait_for_health(url, 300)
        except Exception:
            log(container.logs()[-4000:].decode(errors="replace"))
            raise
        log(f"hf server in container {container.short_id} up at {url} in {time.perf_counter() - started:.0f} s")
        server = HFServer(url, model_path=model_path, token=token)
        server.container = container  # type: ignore[attr-defined]  # for fault tests that cut its network
        yield server
    finally:
        container.remove(force=True)


@contextmanager
def hf_server_on_ray(model_path: str, max_model_len: int = 512, log: Log = _say) -> Iterator[Any]:
    """The built-in server started by a Ray actor (`rollout.placement=ray`) on a local Ray; weights reach it
    through the object store."""
    from agentrl.config.loader import load_config
    from agentrl.rollout.ray_servers import ray_rollout_servers

    overrides = [f"model={model_path}", "rollout.placement=ray", f"rollout.max_model_len={max_model_len}"]
    cfg = load_config(overrides=overrides)
    started = time.perf_counter()
    with ray_rollout_servers(cfg) as (server,):
        log(f"hf server in a Ray actor up at {server.url} in {time.perf_counter() - started:.0f} s")
        yield server
