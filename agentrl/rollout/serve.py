"""Start rollout servers for a run (or from `agentrl serve`), and stop them afterwards.

`rollout.urls` set: connect to those servers and start nothing. Otherwise start `rollout.num_replicas` servers
of `rollout.backend`: on free local ports, or each in a Ray actor on a cluster node (`rollout.placement=ray`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
from collections.abc import AsyncIterator, Callable

from agentrl.config.loader import load_config
from agentrl.config.schema import AgentRLConfig
from agentrl.rollout.handles import RolloutServer, connect_server, launch_server

logger = logging.getLogger(__name__)


@contextlib.asynccontextmanager
async def rollout_servers(cfg: AgentRLConfig, model_path: str) -> AsyncIterator[list[RolloutServer]]:
    """Yield handles on the run's rollout servers: started here, or the `rollout.urls` ones (of
    `rollout.backend`, serving `model_path`). The servers started here are stopped afterwards."""
    if cfg.rollout.urls:
        yield [connect_server(url, cfg.rollout.backend, model_path) for url in cfg.rollout.urls]
        return
    if cfg.rollout.placement == "ray":
        from agentrl.rollout.ray_servers import ray_rollout_servers

        with ray_rollout_servers(cfg) as actors:
            yield list(actors)
        return
    handles: list[RolloutServer] = []
    try:
        for _ in range(cfg.rollout.num_replicas):
            handles.append(await _launch(cfg, model_path))
        yield handles
    finally:
        for h in handles:
            h.stop()


async def _launch(cfg: AgentRLConfig, model_path: str) -> RolloutServer:
    """`launch_server` in a worker thread. Cancelling the wait (Ctrl-C, SIGTERM during a start) cannot stop the
    thread, which goes on to start the server and hand it to nobody: the server it starts is then stopped, here if
    it is up already, else by the thread once it is (exactly one of them stops it; an orphan otherwise outlived
    `agentrl train`)."""
    handover = threading.Lock()
    started: list[RolloutServer] = []
    abandoned: list[bool] = []

    def start() -> RolloutServer:
        handle = launch_server(cfg, model_path)
        with handover:
            if not abandoned:
                started.append(handle)
                return handle
        handle.stop()
        return handle

    try:
        return await asyncio.to_thread(start)
    except BaseException:
        with handover:
            abandoned.append(True)
            orphans = list(started)
        for handle in orphans:
            try:
                handle.stop()
            except Exception as exc:  # the interruption is what the caller must see
                logger.warning("could not stop a rollout server started for a stopped run: %s", exc)
        raise


def serve_from_overrides(overrides: list[str]) -> int:
    """`agentrl serve backend=hf model=default port=8000`: run one server until Ctrl-C."""
    from agentrl.models import resolve_model

    port, host, rest = _pop_serve_args(overrides)
    cfg = load_config(overrides=rest)
    handle = launch_server(cfg, resolve_model(cfg.model), port=port, host=host)
    print(f"{cfg.rollout.backend} server for {cfg.model} at {handle.url} (Ctrl-C to stop)", flush=True)
    token = getattr(handle, "token", None)
    if token and not os.environ.get("AGENTRL_WEIGHTS_TOKEN"):
        print(f"it takes weights with a token: run the trainer with AGENTRL_WEIGHTS_TOKEN={token}", flush=True)
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
