"""fully_async's ContinuousCollector with a FAKE manager and reward pipeline: groups start only within AReaL's
staleness bound, steps take complete groups in completion order, and a push lets more groups start."""

from __future__ import annotations

import asyncio
import itertools

from agentrl.config.schema import TrainerConfig
from agentrl.trainer.continuous import MAX_REGENERATIONS, ContinuousCollector
from agentrl.types import Sample, Segment, StopReason, Trajectory


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
            generated = [
                Segment(token_ids=[1], trainable=False),
                Segment(token_ids=[2], trainable=True, logprobs=[-1.0]),
            ]
            traj = Trajectory(group_id=f"g-{sample.id}", sample_index=k, agent_name="x", segments=generated)
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


class VersionedManager:
    """Each group of 2 takes 0.01 s, the prompt `slow` 20x as long; its tokens carry the version at its start."""

    def __init__(self, version) -> None:
        self.version, self.started = version, []

    async def run(self, samples, seed=None):
        (sample,) = samples
        self.started.append(sample.id)
        at = self.version()
        await asyncio.sleep(0.2 if sample.id == "slow" else 0.01)
        out = []
        for k in range(2):
            segments = [
                Segment(token_ids=[1], trainable=False),
                Segment(token_ids=[2], trainable=True, policy_version=at),
            ]
            traj = Trajectory(group_id=f"g-{sample.id}-{len(self.started)}", sample_index=k, segments=segments)
            traj.metadata["sample_position"] = 0
            traj.stop_reason = StopReason.DONE
            out.append(traj)
        return out


async def replay(stale_samples: str, steps: int = 12) -> tuple[list[tuple[str, int]], ContinuousCollector, list]:
    """Run fully_async's collector against a trainer that takes 0.01 s per step; returns (group, lag) of every
    trained group, the collector and each step's metrics."""
    version = {"v": 0}
    samples = [Sample(id="slow", prompt=[{"role": "user", "content": "s"}])]
    samples += [Sample(id=f"p{i}", prompt=[{"role": "user", "content": str(i)}]) for i in range(40)]
    manager = VersionedManager(lambda: version["v"])
    trainer = TrainerConfig(max_staleness=1, stale_samples=stale_samples)
    c = ContinuousCollector(manager, FakeRewards(), samples, 2, trainer, lambda: version["v"], max_groups_in_flight=8)
    drawn = itertools.count()
    c.drawn = []  # type: ignore[attr-defined]
    c.cursor.take = lambda n: c.drawn.append(next(drawn) % len(samples)) or c.drawn[-1:]  # the slow prompt first
    producer = asyncio.create_task(c.run())
    trained, metrics = [], []
    for step in range(1, steps + 1):
        batch = await asyncio.wait_for(c.next_batch(step), timeout=10)
        for traj in batch.trajectories[::2]:
            trained.append((traj.group_id.split("-")[1], version["v"] - traj.segments[1].policy_version))
        metrics.append(batch.metrics)
        await asyncio.sleep(0.01)
        version["v"] = step
        await c.notify()
    producer.cancel()
    await asyncio.gather(producer, return_exceptions=True)
    return trained, c, metrics


async def test_admission_alone_lets_one_slow_group_be_trained_far_past_the_bound_and_correct_counts_it():
    trained, c, metrics = await replay("correct")
    slow = [lag for group, lag in trained if group == "slow"]
    assert slow and slow[0] > 5  # AReaL's admission rule alone: the slow group is trained many versions later
    assert c.counts["stale_corrected"] >= 1  # kept under TIS correction, and counted
    assert sum(m["rollout/stale_corrected"] for m in metrics) == c.counts["stale_corrected"]
    assert all(lag <= 1 for group, lag in trained if group != "slow")


async def test_drop_keeps_every_trained_group_within_the_bound_and_replaces_the_slow_one():
    trained, c, metrics = await replay("drop")
    assert max(lag for _, lag in trained) <= 1
    assert "slow" not in {group for group, _ in trained} and c.counts["stale_dropped"] == 1
    assert len(trained) == 12 * 2  # every step still got its 2 groups, from the stream
    assert sum(m["rollout/stale_dropped"] for m in metrics) == 1


async def test_regenerate_runs_the_stale_prompt_again_on_the_current_policy_a_bounded_number_of_times():
    trained, c, _ = await replay("regenerate", steps=60)
    assert max(lag for _, lag in trained) <= 1
    assert c.counts["stale_regenerated"] == MAX_REGENERATIONS  # started again after each run came back too stale
    # it is slower than the bound allows every time: after the last regeneration it is dropped, not retried forever
    assert c.manager.started.count("slow") == c.drawn.count(0) + MAX_REGENERATIONS
    assert 1 <= c.counts["stale_dropped"] <= c.drawn.count(0) - 1  # later draws of it, dropped at once


async def test_a_resumed_run_admits_from_its_own_step_not_from_zero():
    c = collector(FakeManager({}), SAMPLES, lambda: 10, staleness=1, batch=2)
    producer = asyncio.create_task(c.run())
    await asyncio.sleep(0.1)
    assert c.started == 4  # (0 + 1 + 1) x 2 groups from step 10, not (10 + 1 + 1) x 2
    producer.cancel()
    await asyncio.gather(producer, return_exceptions=True)


async def test_dynamic_sampling_trains_flat_groups_rather_than_wait_forever():
    trainer = TrainerConfig(max_staleness=4, dynamic_sampling=True, max_sampling_rounds=1)
    c = ContinuousCollector(FakeManager({}), FakeRewards(), SAMPLES, 2, trainer, lambda: 0, 8)  # every reward 1
    producer = asyncio.create_task(c.run())
    batch = await asyncio.wait_for(c.next_batch(1), timeout=5)
    assert len({t.group_id for t in batch.trajectories}) == 2
    assert batch.metrics["rollout/zero_variance"] == 2.0  # 1 round x 2 groups skipped, then taken as they come
    producer.cancel()
    await asyncio.gather(producer, return_exceptions=True)


async def test_dynamic_sampling_skips_groups_with_equal_rewards_and_takes_the_next_from_the_stream():
    class AlternatingRewards:
        async def ascore_batch(self, trajectories, samples):
            flat = samples[0].id in ("p0", "p2")  # these prompts' groups all score 1: no signal
            for k, traj in enumerate(trajectories):
                traj.reward = 1.0 if flat else float(k)

    trainer = TrainerConfig(max_staleness=4, dynamic_sampling=True)
    samples = [Sample(id=f"p{i}", prompt=[{"role": "user", "content": str(i)}]) for i in range(6)]
    c = ContinuousCollector(FakeManager({}), AlternatingRewards(), samples, 2, trainer, lambda: 0, 8)
    drawn = itertools.count()
    c.cursor.take = lambda n: [next(drawn) % len(samples)]
    producer = asyncio.create_task(c.run())
    batch = await asyncio.wait_for(c.next_batch(1), timeout=5)
    assert {t.group_id for t in batch.trajectories} == {"g-p1", "g-p3"}
    assert batch.metrics["rollout/zero_variance"] == 2.0
    producer.cancel()
    await asyncio.gather(producer, return_exceptions=True)
