"""WeightSync with replicas that die and come back: dead ones are skipped and marked, a push no server took
fails, and a replica that answers again gets the last pushed weights before it takes traffic. Fake handles."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from agentrl.rollout.router import Router
from agentrl.trainer.sync import WeightSync, WeightSyncError

torch = pytest.importorskip("torch")


class FakeServer:
    backend = "fake"

    def __init__(self, url: str, *, reports_version: bool = True) -> None:
        self.url = url
        self.policy_version = 0
        self.loaded: list[tuple[int, float]] = []
        self.down = False
        self.refuses = False
        self.reports_version = reports_version

    def update_weights(self, weights, version, in_flight="finish", timeout=600.0) -> None:
        if self.down:
            raise httpx.ConnectError("connection refused")
        if self.refuses:
            raise httpx.HTTPStatusError("bad weights", request=httpx.Request("POST", self.url), response=None)
        from safetensors.torch import load_file

        self.loaded.append((version, float(load_file(Path(weights))["w"][0])))
        self.policy_version = version

    def served_version(self) -> int | None:
        return self.policy_version if self.reports_version else None


def state(value: float) -> dict[str, torch.Tensor]:
    return {"w": torch.full((4,), value)}


def test_a_dead_replica_is_skipped_marked_and_caught_up_when_it_answers_again() -> None:
    a, b = FakeServer("http://a:1"), FakeServer("http://b:2")
    router = Router([a.url, b.url])
    sync = WeightSync([a, b], router=router)
    sync.push(state(1.0), version=1)
    b.down = True
    sync.push(state(2.0), version=2)  # b is gone: marked dead, a still gets it
    assert router.dead == [b.url] and a.loaded[-1] == (2, 2.0)
    sync.push(state(3.0), version=3)  # a dead replica is not even tried
    assert b.loaded == [(1, 1.0)]
    b.down = False  # restarted, serving its old weights
    assert sync.catch_up(b.url) is True
    assert b.loaded[-1] == (3, 3.0) and router.policy_version(b.url) == 3
    assert sync.catch_up(b.url) is True and len(b.loaded) == 2  # already current: nothing sent
    sync.close()


def test_a_replica_that_cannot_say_its_version_always_gets_the_weights_again() -> None:
    a = FakeServer("http://a:1", reports_version=False)
    sync = WeightSync([a], router=Router([a.url]))
    sync.push(state(1.0), version=1)
    sync.catch_up(a.url)
    assert a.loaded == [(1, 1.0), (1, 1.0)]


def test_a_push_no_server_took_fails_and_a_refusal_is_not_routed_around() -> None:
    a, b = FakeServer("http://a:1"), FakeServer("http://b:2")
    sync = WeightSync([a, b], router=Router([a.url, b.url]))
    a.down = b.down = True
    with pytest.raises(WeightSyncError, match="no rollout server took the weights of version 1"):
        sync.push(state(1.0))
    a.down = b.down = False
    sync.router.mark_alive(a.url)
    sync.router.mark_alive(b.url)
    b.refuses = True
    with pytest.raises(WeightSyncError, match="fake server at http://b:2 failed: bad weights"):
        sync.push(state(2.0))
    assert sync.router.dead == []


async def test_the_router_revive_hook_is_the_catch_up() -> None:
    a = FakeServer("http://a:1")

    async def probe(url: str) -> bool:
        return True

    router = Router([a.url], probe=probe)
    sync = WeightSync([a], router=router)
    sync.push(state(5.0), version=7)
    router.mark_dead(a.url)
    a.policy_version = 0  # came back fresh
    assert await router.check_health() == [a.url]
    assert a.loaded[-1] == (7, 5.0)


def test_a_broadcast_route_sends_each_push_once_to_all_servers_and_writes_no_file() -> None:
    a, b = FakeServer("http://a:1"), FakeServer("http://b:2")
    sent: list[tuple[int, float]] = []
    sync = WeightSync(
        [a, b], router=Router([a.url, b.url]), broadcast=lambda s, v, to: sent.append((v, float(s["w"][0])))
    )
    sync.push(state(2.0), version=3)
    assert sent == [(3, 2.0)] and a.loaded == b.loaded == []  # no file route taken
    assert a.policy_version == b.policy_version == 3 and sync.router.policy_version(b.url) == 3
    b.policy_version = 0  # restarted: it takes no traffic until a broadcast brings it to the current version
    assert sync.catch_up(b.url) is False and sync.catch_up(a.url) is True


class FakeSender:
    """A FAKE NCCL sender over a fixed group of servers: a push sets each member's version."""

    def __init__(self, servers, log) -> None:
        self.servers, self.log, self.closed = servers, log, False
        log.append(("group", [s.url for s in servers]))

    def push(self, state, version, in_flight="finish") -> None:
        assert not self.closed
        for server in self.servers:
            server.policy_version = version
        self.log.append(("push", version))

    def close(self) -> None:
        self.closed = True


def test_nccl_pushes_leave_dead_replicas_out_and_take_a_restarted_one_back_at_the_next_push() -> None:
    from agentrl.trainer.nccl_sync import NcclPush

    a, b = FakeServer("http://a:1"), FakeServer("http://b:2")
    router, log = Router([a.url, b.url]), []
    push = NcclPush(lambda servers: FakeSender(servers, log), [a, b], "finish")
    sync = WeightSync([a, b], router=router, broadcast=push)
    sync.push(state(1.0), version=1)
    router.mark_dead(b.url)
    sync.push(state(2.0), version=2)  # the group is formed again without b: a dead rank would hang the broadcast
    assert log == [("group", [a.url, b.url]), ("push", 1), ("group", [a.url]), ("push", 2)]
    assert (a.policy_version, b.policy_version) == (2, 1)
    b.policy_version = 0  # it comes back, restarted on its first weights
    assert sync.catch_up(b.url) is False  # no traffic on stale weights
    sync.push(state(3.0), version=3)  # it rejoins the group, and gets this push
    assert log[-2:] == [("group", [a.url, b.url]), ("push", 3)] and b.policy_version == 3
    assert sync.catch_up(b.url) is True and push.regroups == 2


def test_a_failed_broadcast_is_a_weight_sync_error() -> None:
    def broken(state, version, servers):
        raise RuntimeError("NCCL error: unhandled system error")

    sync = WeightSync([FakeServer("http://a:1")], broadcast=broken)
    with pytest.raises(WeightSyncError, match="NCCL weight broadcast of version 1 failed: NCCL error"):
        sync.push(state(1.0))


def test_nccl_transfer_without_a_gpu_says_so() -> None:
    from agentrl.config.loader import load_config
    from agentrl.errors import UserError
    from agentrl.trainer.nccl_sync import nccl_sender

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    cfg = load_config(overrides=["rollout.backend=sglang", "rollout.weight_transfer=nccl"])
    with pytest.raises(UserError, match="GPU|CUDA"):
        nccl_sender([FakeServer("http://a:1")], cfg)


def test_a_group_that_fails_to_form_is_formed_again_at_the_next_push() -> None:
    from agentrl.trainer.nccl_sync import NcclPush

    a, b = FakeServer("http://a:1"), FakeServer("http://b:2")
    router, log, fail = Router([a.url, b.url]), [], [False]

    def make(servers):
        if fail[0]:
            raise RuntimeError("NCCL init timed out")
        return FakeSender(servers, log)

    push = NcclPush(make, [a, b], "finish")
    sync = WeightSync([a, b], router=router, broadcast=push)
    router.mark_dead(b.url)
    fail[0] = True
    with pytest.raises(WeightSyncError, match="NCCL init timed out"):
        sync.push(state(1.0), version=1)
    fail[0] = False
    sync.push(state(2.0), version=2)  # not the closed group of before: a new one over the live server
    assert log[-2:] == [("group", [a.url]), ("push", 2)] and a.policy_version == 2
