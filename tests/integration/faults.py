"""A FAULT-INJECTING HTTP proxy in front of a real rollout server, for fault tests only.

Every request is forwarded unchanged, except `/v1/completions` requests whose sampling `seed` is in `failing_seeds`:
those get HTTP 503 every time (also on the client's retries), as from a server that keeps breaking on them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
from collections.abc import Iterator

import aiohttp
from aiohttp import web


class FaultInjectingProxy:
    """Forwards to `target`; answers 503 to completions whose seed is in `failing_seeds` (counted in `failed`)."""

    def __init__(self, target: str, failing_seeds: set[int]):
        self.target = target.rstrip("/")
        self.failing_seeds = failing_seeds
        self.failed = 0
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def start(self) -> FaultInjectingProxy:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result(timeout=30)
        return self

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)

    async def _serve(self) -> None:
        app = web.Application(client_max_size=1 << 30)
        app.router.add_route("*", "/{path:.*}", self._forward)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def _forward(self, request: web.Request) -> web.Response:
        body = await request.read()
        if request.path == "/v1/completions" and json.loads(body or b"{}").get("seed") in self.failing_seeds:
            self.failed += 1
            return web.json_response({"error": {"message": "injected fault: engine crashed"}}, status=503)
        headers = {"Content-Type": request.headers.get("Content-Type", "application/json")}
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as session,
            session.request(request.method, self.target + request.path_qs, data=body, headers=headers) as answer,
        ):
            return web.Response(status=answer.status, body=await answer.read(), content_type=answer.content_type)


@contextlib.contextmanager
def fault_injecting_proxy(target: str, failing_seeds: set[int]) -> Iterator[FaultInjectingProxy]:
    proxy = FaultInjectingProxy(target, failing_seeds).start()
    try:
        yield proxy
    finally:
        proxy.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
