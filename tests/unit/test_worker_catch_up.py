"""A rollout worker takes a replica that answers again back only once it serves the driver's current weights (a
FAKE replica script stands in for the version its handle reads)."""

from __future__ import annotations

from agentrl.config import AgentRLConfig
from agentrl.loops import worker as worker_module
from agentrl.loops.worker import RolloutWorker


class FakeReplica:
    """Reports the replica's served version from a script: a restart on its first weights, then the catch-up."""

    def __init__(self, versions: list[int | None]) -> None:
        self.versions, self.asked = versions, 0

    def served_version(self, url: str, policy: str | None = None) -> int | None:
        self.asked += 1
        return self.versions[min(self.asked, len(self.versions)) - 1]


async def test_a_restarted_replica_waits_for_the_driver_s_weights(monkeypatch) -> None:
    monkeypatch.setattr(worker_module, "CATCH_UP_WAIT_S", 5.0)
    monkeypatch.setattr(worker_module, "CATCH_UP_POLL_S", 0.0)
    worker = RolloutWorker(AgentRLConfig(), ["http://a:1", "http://b:2"])
    worker.note_versions({"http://a:1": 3, "http://b:2": 1})  # the driver's router when the job started
    replica = FakeReplica([0, 0, 3])  # back on version 0; the driver's push brings it to 3
    worker._served_version = replica.served_version
    assert await worker._caught_up("http://b:2") is True
    assert replica.asked == 3  # it was not taken while it served version 0


async def test_a_replica_still_behind_stays_out_until_the_next_health_check(monkeypatch) -> None:
    monkeypatch.setattr(worker_module, "CATCH_UP_WAIT_S", 0.0)
    worker = RolloutWorker(AgentRLConfig(), ["http://a:1"])
    worker.note_versions({"http://a:1": 2})
    worker._served_version = FakeReplica([1]).served_version
    assert await worker._caught_up("http://a:1") is False
    worker._served_version = FakeReplica([None]).served_version  # a server that cannot say is not trusted either
    assert await worker._caught_up("http://a:1") is False


def test_the_version_comes_from_the_backend_s_handle_and_an_unreachable_replica_has_none() -> None:
    worker = RolloutWorker(AgentRLConfig(), ["http://127.0.0.1:9"])
    assert worker._served_version("http://127.0.0.1:9") is None  # nothing listens there


async def test_with_several_policies_a_replica_waits_for_its_own_policy_s_weights(monkeypatch) -> None:
    """A frozen judge's replicas stay on version 0 while the learning policy's reach 3: a revived judge replica
    serving 0 is taken back at once, a revived learner replica only at 3."""
    monkeypatch.setattr(worker_module, "CATCH_UP_WAIT_S", 5.0)
    monkeypatch.setattr(worker_module, "CATCH_UP_POLL_S", 0.0)
    urls = {"solver": ["http://a:1", "http://b:2"], "judge": ["http://c:3"]}
    worker = RolloutWorker(AgentRLConfig(), urls, frozen=["judge"])
    worker.note_versions({"http://a:1": 3, "http://b:2": 3, "http://c:3": 0})
    judge = FakeReplica([0])
    worker._served_version = judge.served_version
    assert await worker._caught_up("http://c:3") is True and judge.asked == 1
    solver = FakeReplica([0, 3])
    worker._served_version = solver.served_version
    assert await worker._caught_up("http://b:2") is True and solver.asked == 2


async def test_lora_adapters_sharing_their_bases_replica_each_wait_for_their_own_version(monkeypatch) -> None:
    """Adapters of a frozen base share its replica: the base's client takes it back at the base's version 0, each
    adapter's client once the replica serves that adapter at the driver's version (asked for by adapter name)."""
    from agentrl.config.loader import load_config

    monkeypatch.setattr(worker_module, "CATCH_UP_WAIT_S", 5.0)
    monkeypatch.setattr(worker_module, "CATCH_UP_POLL_S", 0.0)
    cfg = load_config(
        "quickstart",
        ["policies={base: {trainable: false}, a: {lora_of: base}, b: {lora_of: base}}", "trainer.lora_rank=4"],
    )
    url = "http://a:1"
    worker = RolloutWorker(cfg, {"base": [url], "a": [url], "b": [url]}, frozen=["base"])
    worker.note_versions({url: 3})
    asked: list[str | None] = []
    served = {None: 0, "a": 3, "b": 2}

    def served_version(url: str, policy: str | None = None) -> int | None:
        adapter = worker._rollout(policy).lora_adapter
        asked.append(adapter)
        return served[adapter]

    worker._served_version = served_version
    assert await worker._caught_up(url, policy="base") is True
    assert await worker._caught_up(url, policy="a") is True
    monkeypatch.setattr(worker_module, "CATCH_UP_WAIT_S", 0.0)
    assert await worker._caught_up(url, policy="b") is False  # adapter b is still on 2
    assert asked == [None, "a", "b"]
