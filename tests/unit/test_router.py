"""Router tests: pure picking logic, then routing over real HTTP to FAKE servers on localhost."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from agentrl.rollout import LLMClient, NoHealthyReplicaError, Router, SamplingParams
from agentrl.rollout.router import normalize_url
from agentrl.rollout.testing import fake_servers, fake_token_ids

A, B, C = "http://a:1", "http://b:2", "http://c:3"
FAST: dict[str, Any] = {"backoff_base": 0.01, "backoff_max": 0.05, "health_interval": 0.05}


async def eventually(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Waits until `condition()` holds (polling), failing the test after `timeout` seconds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition never held"
        await asyncio.sleep(0.01)


def test_normalize_url() -> None:
    assert normalize_url("http://h:8000/v1/") == "http://h:8000"
    assert normalize_url("h:8000") == "http://h:8000"


def test_least_in_flight_and_release() -> None:
    router = Router([A, B, C])
    picks = [router.acquire() for _ in range(6)]
    assert Counter(picks) == {A: 2, B: 2, C: 2}
    router.release(A)
    router.release(A)
    assert router.acquire() == A
    assert router.in_flight == {A: 1, B: 2, C: 2}
    assert router.peak_in_flight == {A: 2, B: 2, C: 2}


def test_sticky_session_stays_while_healthy() -> None:
    router = Router([A, B, C])
    first = router.acquire("s1")
    for _ in range(5):  # load on the pinned replica does not move the session
        assert router.acquire("s1") == first
    assert router.session_replica("s1") == first
    others = {router.acquire(f"other-{i}") for i in range(2)}
    assert first not in others


def test_session_moves_when_replica_dies_and_stays_moved() -> None:
    router = Router([A, B])
    first = router.acquire("s")
    router.mark_dead(first)
    moved = router.acquire("s")
    assert moved != first
    router.mark_alive(first)
    assert router.acquire("s") == moved


def test_avoid_skips_replica_without_moving_session() -> None:
    router = Router([A, B])
    first = router.acquire("s")
    assert router.acquire("s", avoid={first}) != first
    assert router.acquire("s") == first
    assert router.acquire("s", avoid={A, B}) == first  # nothing else live: avoiding is ignored


def test_dead_replicas_skipped_and_all_dead_raises() -> None:
    router = Router([A, B])
    router.mark_dead(A)
    assert {router.acquire() for _ in range(4)} == {B}
    router.mark_dead(B)
    with pytest.raises(NoHealthyReplicaError):
        router.acquire()
    assert router.dead == [A, B]


def test_add_and_remove_replica() -> None:
    router = Router([A])
    router.acquire("s")
    router.add_replica(B + "/v1")
    router.remove_replica(A)
    router.release(A)  # a request that ends after its replica was removed is harmless
    assert router.replicas == [B]
    assert router.acquire("s") == B
    assert router.in_flight == {B: 1}


def test_session_table_is_bounded() -> None:
    router = Router([A, B], max_sessions=2)
    for s in ("s1", "s2", "s3"):
        router.acquire(s)
    assert router.session_replica("s1") is None
    assert router.session_replica("s3") is not None


def test_policy_versions() -> None:
    router = Router([A])
    assert router.policy_version(A) is None
    router.set_policy_version(A + "/", 4)
    assert router.policy_version(A) == 4


async def test_check_health_and_background_loop_revive() -> None:
    up: set[str] = set()

    async def probe(url: str) -> bool:
        if url == C:
            raise OSError("probe crashed")
        return url in up

    router = Router([A, B, C], probe=probe, health_interval=0.02)
    for url in (A, B, C):
        router.mark_dead(url)
    up.add(A)
    assert await router.check_health() == [A]
    router.start()
    up.add(B)
    await asyncio.sleep(0.1)
    await router.stop()
    assert router.healthy == [A, B]


# ---- over HTTP, against FAKE servers ---------------------------------------------------------------------


async def test_sticky_over_http() -> None:
    with fake_servers(3) as servers:
        async with LLMClient([s.url for s in servers], **FAST) as llm:
            outs = [await llm.generate([1, 2], SamplingParams(max_tokens=2), session_id="traj-1") for _ in range(8)]
            assert len({o.replica for o in outs}) == 1
            assert sorted(s.completions for s in servers) == [0, 0, 8]


async def test_least_in_flight_spreads_concurrent_requests() -> None:
    with fake_servers(3, latency=0.2) as servers:
        async with LLMClient([s.url for s in servers], **FAST) as llm:
            params = SamplingParams(max_tokens=4)
            outs = await asyncio.gather(*(llm.generate([i], params) for i in range(30)))
            assert [o.token_ids for o in outs] == [fake_token_ids([i], 4) for i in range(30)]
            assert [s.completions for s in servers] == [10, 10, 10]
            assert list(llm.router.peak_in_flight.values()) == [10, 10, 10]
            assert all(1 <= s.max_in_flight <= 10 for s in servers)
            assert all(n == 0 for n in llm.router.in_flight.values())


async def test_replica_killed_mid_run_is_routed_around() -> None:
    with fake_servers(3, latency=0.3) as servers:
        victim = servers[0]
        async with LLMClient([s.url for s in servers], **FAST) as llm:
            params = SamplingParams(max_tokens=3)
            tasks = [asyncio.create_task(llm.generate([i], params, session_id=f"s{i}")) for i in range(30)]
            await eventually(lambda: victim.in_flight > 0)
            victim.kill()
            outs = await asyncio.gather(*tasks)
            assert [o.token_ids for o in outs] == [fake_token_ids([i], 3) for i in range(30)]
            assert all(o.replica != victim.url for o in outs)
            # the next request pinned to the dead replica finds it gone and moves its session
            await asyncio.gather(*(llm.generate([i], params, session_id=f"s{i}") for i in range(30)))
            assert llm.router.dead == [victim.url]
            assert sum(s.completions for s in servers[1:]) == 60


async def test_revived_replica_is_taken_back_after_health_check() -> None:
    with fake_servers(2) as servers:
        victim = servers[1]
        async with LLMClient([s.url for s in servers], **FAST) as llm:
            victim.kill()
            for i in range(4):
                assert (await llm.generate([i], SamplingParams(max_tokens=1))).replica == servers[0].url
            assert llm.router.dead == [victim.url]
            victim.restart()
            await eventually(lambda: not llm.router.dead)
            assert llm.router.healthy == [s.url for s in servers]
            outs = await asyncio.gather(*(llm.generate([i], SamplingParams(max_tokens=1)) for i in range(4)))
            assert victim.url in {o.replica for o in outs}


async def test_unhealthy_replica_stays_dead_until_health_passes() -> None:
    with fake_servers(2) as servers:
        victim = servers[1]
        async with LLMClient([s.url for s in servers], **FAST) as llm:
            victim.kill()
            await llm.generate([1], SamplingParams(max_tokens=1))
            await llm.generate([2], SamplingParams(max_tokens=1))
            assert llm.router.dead == [victim.url]
            victim.healthy = False
            victim.restart()
            await eventually(lambda: victim.health_checks >= 3)
            assert llm.router.dead == [victim.url]
            victim.healthy = True
            await eventually(lambda: not llm.router.dead)


async def test_a_replica_that_answers_again_takes_traffic_only_after_catching_up() -> None:
    caught_up: list[str] = []
    ready = {A: False}

    async def probe(url: str) -> bool:
        return True

    async def catch_up(url: str) -> bool:
        caught_up.append(url)
        return ready[url]

    router = Router([A, B], probe=probe, on_revive=catch_up)
    router.mark_dead(A)
    assert await router.check_health() == [] and router.dead == [A]  # answered, but could not catch up
    ready[A] = True
    assert await router.check_health() == [A] and router.healthy == [A, B]
    assert caught_up == [A, A]
    assert router.failover_metrics() == {
        "rollout/server_retries": 0.0,
        "rollout/replica_restarts": 1.0,
        "rollout/replica_stalls": 0.0,
        "rollout/live_replicas": 2.0,
    }
    assert router.failover_metrics()["rollout/replica_restarts"] == 0.0  # counted once


async def test_retries_of_a_killed_replicas_requests_are_counted() -> None:
    with fake_servers(2, latency=0.3) as servers:
        victim = servers[0]
        async with LLMClient([s.url for s in servers], **FAST) as llm:
            tasks = [asyncio.create_task(llm.generate([i], SamplingParams(max_tokens=2))) for i in range(10)]
            await eventually(lambda: victim.in_flight > 0)
            lost = victim.in_flight
            victim.kill()
            outs = await asyncio.gather(*tasks)
            assert [o.token_ids for o in outs] == [fake_token_ids([i], 2) for i in range(10)]
            assert llm.router.failover_metrics()["rollout/server_retries"] >= lost
