"""The stall guard (`agentrl.rollout.stall`): a replica that holds requests without completing any is cut off, a
slow one that completes some is not, and the client retries a cut-off replica's requests on another one."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web

from agentrl.deadline import AdaptiveDeadline
from agentrl.rollout import LLMClient
from agentrl.rollout.protocol import SamplingParams
from agentrl.rollout.stall import StallGuard


async def test_a_replica_with_requests_open_and_none_completed_past_the_deadline_is_cut_off() -> None:
    cut: list[str] = []
    guard = StallGuard(AdaptiveDeadline(explicit=0.3), on_stall=cut.append)

    async def hang(url: str) -> None:
        async with guard.request(url):
            await asyncio.sleep(30)

    async def quick(url: str) -> None:
        async with guard.request(url):
            await asyncio.sleep(0.01)

    stuck = [asyncio.ensure_future(hang("http://stuck")) for _ in range(3)]
    slow = asyncio.ensure_future(hang("http://slow"))
    for _ in range(6):  # the slow replica keeps completing other requests: its clock restarts each time
        await quick("http://slow")
        await asyncio.sleep(0.1)
        assert guard.check() in ([], ["http://stuck"])
    assert cut == ["http://stuck"] and guard.was_cut("http://stuck") and guard.stalls == 1
    for task in stuck:
        with pytest.raises(TimeoutError):
            await task
    assert not slow.done()
    slow.cancel()
    await quick("http://stuck")  # answers again: no longer counted as cut
    assert not guard.was_cut("http://stuck")


async def test_the_client_retries_a_stalled_replicas_requests_on_another_one() -> None:
    hold = asyncio.Event()

    async def stalled(request: web.Request) -> web.Response:
        await hold.wait()
        return web.json_response({})

    async def healthy(request: web.Request) -> web.Response:
        body = await request.json()
        choice = {"token_ids": [7, 8], "logprobs": {"token_logprobs": [-0.1, -0.2]}, "finish_reason": "length"}
        return web.json_response({"choices": [choice], "policy_version": 0, "prompt_token_ids": body["prompt"]})

    async def start(handler) -> tuple[web.AppRunner, str]:
        app = web.Application()
        app.router.add_post("/v1/completions", handler)
        app.router.add_get("/health", lambda r: web.json_response({"status": "ok"}))
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        return runner, f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]

    (bad, bad_url), (good, good_url) = await start(stalled), await start(healthy)
    try:
        async with LLMClient([bad_url, good_url], stall_timeout=0.5, health_interval=60) as llm:
            outs = await asyncio.wait_for(
                asyncio.gather(*(llm.generate([1, 2], SamplingParams(max_tokens=2)) for _ in range(6))), 20
            )
            assert all(o.token_ids == [7, 8] and o.replica == good_url for o in outs)
            assert llm.router.dead == [bad_url] and llm.router.failover_metrics()["rollout/replica_stalls"] == 1.0
    finally:
        hold.set()
        await bad.cleanup()
        await good.cleanup()
