"""A rollout worker takes a replica that answers again back only once it serves the driver's current weights (a
FAKE client stands in for the replica's version route)."""

from __future__ import annotations

from agentrl.config import AgentRLConfig
from agentrl.loops import worker as worker_module
from agentrl.loops.worker import RolloutWorker


class FakeClient:
    """Reports the replica's served version from a script: a restart on its first weights, then the catch-up."""

    def __init__(self, versions: list[int | None]) -> None:
        self.versions, self.asked = versions, 0

    async def served_version(self, url: str) -> int | None:
        self.asked += 1
        return self.versions[min(self.asked, len(self.versions)) - 1]


async def test_a_restarted_replica_waits_for_the_driver_s_weights(monkeypatch) -> None:
    monkeypatch.setattr(worker_module, "CATCH_UP_WAIT_S", 5.0)
    monkeypatch.setattr(worker_module, "CATCH_UP_POLL_S", 0.0)
    worker = RolloutWorker(AgentRLConfig(), ["http://a:1", "http://b:2"])
    worker.note_versions({"http://a:1": 3, "http://b:2": 1})  # the driver's router when the job started
    worker._client = FakeClient([0, 0, 3])  # back on version 0; the driver's push brings it to 3
    assert await worker._caught_up("http://b:2") is True
    assert worker._client.asked == 3  # it was not taken while it served version 0


async def test_a_replica_still_behind_stays_out_until_the_next_health_check(monkeypatch) -> None:
    monkeypatch.setattr(worker_module, "CATCH_UP_WAIT_S", 0.0)
    worker = RolloutWorker(AgentRLConfig(), ["http://a:1"])
    worker.note_versions({"http://a:1": 2})
    worker._client = FakeClient([1])
    assert await worker._caught_up("http://a:1") is False
    worker._client = FakeClient([None])  # a server that cannot say which weights it holds is not trusted either
    assert await worker._caught_up("http://a:1") is False
