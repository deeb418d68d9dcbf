"""Start rollout servers for a run (or from `agentrl serve`), and stop them afterwards.

`rollout.urls` set: connect to those servers and start nothing. Otherwise start `rollout.num_replicas` servers
of `rollout.backend` on free local ports.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

from agentrl.config.loader import load_config
from agentrl.config.schema import AgentRLConfig
from agentrl.errors import UserError


def start_server(cfg: AgentRLConfig, model_path: str, port: int | None = None, host: str = "127.0.0.1") -> Any:
    """Start one server of `cfg.rollout.backend`; returns a handle with `.url` and `.stop()`."""
    backend = cfg.rollout.backend
    if backend == "hf":
        from agentrl.rollout.servers.hf.launch import launch_hf_server

        return launch_hf_server(model_path, port, host=host, max_model_len=cfg.rollout.max_model_len)
    if backend == "vllm":
        from agentrl.rollout.servers.vllm import VLLMServer

        return VLLMServer.launch(model_path, port=port, host=host, max_model_len=cfg.rollout.max_model_len)
    if backend == "sglang":
        from agentrl.rollout.servers.sglang import SGLangServer

        return SGLangServer.launch(model_path, port=port, host=host)
    raise UserError(f"unknown rollout.backend {backend!r}; use hf, vllm or sglang")


@contextlib.asynccontextmanager
async def rollout_servers(cfg: AgentRLConfig, model_path: str) -> AsyncIterator[list[str]]:
    """Yield the base URLs of the run's rollout servers, started here unless `rollout.urls` is set."""
    if cfg.rollout.urls:
        yield list(cfg.rollout.urls)
        return
    handles: list[Any] = []
    try:
        for _ in range(cfg.rollout.num_replicas):
            handles.append(await asyncio.to_thread(start_server, cfg, model_path))
        yield [h.url for h in handles]
    finally:
        for h in handles:
            h.stop()


def serve_from_overrides(overrides: list[str]) -> int:
    """`agentrl serve backend=hf model=default port=8000`: run one server until Ctrl-C."""
    from agentrl.models import resolve_model

    port, host, rest = _pop_serve_args(overrides)
    cfg = load_config(overrides=rest, check_run=False)
    handle = start_server(cfg, resolve_model(cfg.model), port=port, host=host)
    print(f"{cfg.rollout.backend} server for {cfg.model} at {handle.url} (Ctrl-C to stop)", flush=True)
    _wait_for_signal(handle.stop)
    return 0


def _pop_serve_args(overrides: list[str]) -> tuple[int | None, str, list[str]]:
    port, host, rest = None, "127.0.0.1", []
    for item in overrides:
        key, _, value = item.partition("=")
        if key == "port":
            port = int(value)
        elif key == "host":
            host = value
        elif key == "backend":
            rest.append(f"rollout.backend={value}")
        else:
            rest.append(item)
    return port, host, rest


def _wait_for_signal(stop: Callable[[], None]) -> None:
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    try:
        done.wait()
    finally:
        stop()
