"""fully_async's ContinuousCollector with a FAKE manager and reward pipeline: groups start only within AReaL's
staleness bound, steps take complete groups in completion order, and a push lets more groups start."""

from __future__ import annotations

import asyncio

from agentrl.config.schema import TrainerConfig
from agentrl.trainer.continuous import ContinuousCollector
from agentrl.types import Sample, StopReason, Trajectory


class FakeManager:
    """Each group of 2 takes `delay(prompt)` seconds; records when each group started."""

    def __init__(self, delays: dict[str, float]) -> None:
        self.delays, self.started = delays, []

    async def run(self, samples, seed=None):
        (sample,) = samples
        self.started.append(sample.id)
        await asyncio.sleep(self.delays.get(sample.id, 0.01))
        out = []
        for k in range(2):
            traj = Trajectory(group_id=f"g-{sample.id}", sample_index=k, agent_name="x")
            traj.metadata["sample_position"] = 0
            traj.stop_reason = StopReason.ERROR if sample.id == "broken" and k == 0 else StopReason.DONE
            out.append(traj)
        return out


class FakeRewards:
    async def ascore_batch(self, trajectories, samples):
        for traj in trajectories:
            traj.reward = 1.0


def collector(manager, samples, version, staleness=1, batch=2):
    trainer = TrainerConfig(max_staleness=staleness)
    return ContinuousCollector(manager, FakeRewards(), samples, batch, trainer, version, max_groups_in_flight=100)


SAMPLES = [Sample(id=f"p{i}", prompt=[{"role": "user", "content": str(i)}]) for i in range(12)]


async def test_admission_stays_within_the_staleness_bound_and_a_push_moves_it():
    version = {"v": 0}
    c = collector(FakeManager({}), SAMPLES, lambda: version["v"], staleness=1, batch=2)
    producer = asyncio.create_task(c.run())
    await asyncio.sleep(0.1)
    assert c.started == 4  # (0 + 1 + 1) x 2 groups, then it waits
    batch = await c.next_batch(1)
    assert len(batch.trajectories) == 4 and batch.step == 1
    await asyncio.sleep(0.1)
    assert c.started == 4  # taking a batch is not a push
    version["v"] = 1
    await c.notify()
    await asyncio.sleep(0.1)
    assert c.started == 6
    producer.cancel()
    await asyncio.gather(producer, return_exceptions=True)


async def test_steps_take_complete_groups_in_completion_order():
    samples = [Sample(id=i, prompt=[{"role": "user", "content": i}]) for i in ("slow", "fast1", "fast2", "fast3")]
    manager = FakeManager({"slow": 0.5, "fast1": 0.01, "fast2": 0.02, "fast3": 0.03})
    c = collector(manager, samples, lambda: 0, staleness=1, batch=2)
    order = [0, 1, 2, 3]  # the data order: the slow prompt first
    c.cursor.take = lambda n: [order.pop(0)]
    producer = asyncio.create_task(c.run())
    batch = await c.next_batch(1)
    assert {t.group_id for t in batch.trajectories} == {"g-fast1", "g-fast2"}  # the slow group does not gate it
    producer.cancel()
    await asyncio.gather(producer, return_exceptions=True)


async def test_failed_trajectories_are_kept_for_the_record_but_not_trained():
    samples = [Sample(id="broken", prompt=[{"role": "user", "content": "x"}])] * 4
    c = collector(FakeManager({}), samples, lambda: 0, staleness=0, batch=1)
    producer = asyncio.create_task(c.run())
    batch = await c.next_batch(1)
    assert len(batch.generated) == 2 and len(batch.trajectories) == 1 and batch.generated[0].reward is None
    producer.cancel()
    await asyncio.gather(producer, return_exceptions=True)


async def test_a_group_that_fails_outside_the_agent_loop_stops_the_step_instead_of_hanging():
    class BrokenRewards:
        async def ascore_batch(self, trajectories, samples):
            raise ValueError("reward function bug")

    trainer = TrainerConfig(max_staleness=0)
    c = ContinuousCollector(FakeManager({}), BrokenRewards(), SAMPLES, 1, trainer, lambda: 0, max_groups_in_flight=4)
    producer = asyncio.create_task(c.run())
    try:
        await asyncio.wait_for(c.next_batch(1), timeout=5)
        raise AssertionError("next_batch returned a batch from a group whose scoring raised")
    except RuntimeError as error:
        assert "reward function bug" in repr(error.__cause__)
    producer.cancel()
    await asyncio.gather(producer, return_exceptions=True)
