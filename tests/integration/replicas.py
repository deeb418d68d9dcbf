"""Helpers of the failover tests: two real `hf` replicas started side by side, and a kill once one is busy."""

from __future__ import annotations

import concurrent.futures
import time

import httpx

from agentrl.rollout.servers.hf.launch import launch_hf_server


def running(url: str) -> int:
    try:
        return int(httpx.get(f"{url}/health", timeout=2).json()["running"])
    except httpx.HTTPError:
        return 0


def two_replicas(model_path: str):
    """Two `hf` servers, started side by side (each start is mostly one process's imports: ~10 s saved)."""
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        starts = [pool.submit(launch_hf_server, model_path, max_model_len=1024) for _ in range(2)]
    started = [f.result() for f in starts if f.exception() is None]
    if len(started) < 2:
        for handle in started:
            handle.stop()
        raise next(f.exception() for f in starts if f.exception() is not None)
    return started


def kill_once_busy(victim, timeout: float = 300.0) -> int:
    """SIGKILL the victim as soon as it has requests in flight; returns how many it had."""
    deadline = time.monotonic() + timeout
    while (busy := running(victim.url)) == 0:
        if time.monotonic() > deadline:
            return 0
        time.sleep(0.05)
    victim.process.kill()
    victim.process.wait()
    return busy
