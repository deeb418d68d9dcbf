"""Servers a run starts are stopped even when the run is stopped while one is still starting."""

import asyncio
import threading

from agentrl.config.loader import load_config
from agentrl.rollout import serve


class SlowStart:
    """A server whose start takes a while (imports, weights); counts its stops."""

    def __init__(self) -> None:
        self.stops = 0
        self.stopped = threading.Event()

    def stop(self) -> None:
        self.stops += 1
        self.stopped.set()


async def test_a_server_still_starting_when_the_run_is_cancelled_is_stopped_once_up(monkeypatch):
    servers: list[SlowStart] = []
    starting, go_on = threading.Event(), threading.Event()

    def launch(cfg, model_path):
        starting.set()
        go_on.wait(5)  # the start goes on after the run has given up on it
        servers.append(SlowStart())
        return servers[-1]

    monkeypatch.setattr(serve, "launch_server", launch)
    got_servers = []

    async def run() -> None:
        async with serve.rollout_servers(load_config("quickstart"), "model") as handles:
            got_servers.append(handles)

    task = asyncio.create_task(run())
    await asyncio.to_thread(starting.wait, 5)
    task.cancel()  # what SIGTERM or Ctrl-C does to the run mid-start
    (outcome,) = await asyncio.gather(task, return_exceptions=True)
    go_on.set()
    assert isinstance(outcome, asyncio.CancelledError) and not got_servers
    server = await asyncio.to_thread(_started, servers)
    assert await asyncio.to_thread(server.stopped.wait, 5)
    await asyncio.sleep(0.1)
    assert server.stops == 1


async def test_servers_that_started_are_stopped_after_the_run(monkeypatch):
    servers: list[SlowStart] = []
    monkeypatch.setattr(serve, "launch_server", lambda cfg, path: servers.append(SlowStart()) or servers[-1])
    async with serve.rollout_servers(load_config("quickstart", ["rollout.num_replicas=2"]), "model") as handles:
        assert handles == servers and not any(s.stopped.is_set() for s in servers)
    assert all(s.stopped.is_set() for s in servers)


def _started(servers: list[SlowStart]) -> SlowStart:
    for _ in range(100):
        if servers:
            return servers[0]
        threading.Event().wait(0.05)
    raise AssertionError("the server never started")
