"""The run's watchdog (`agentrl.trainer.watchdog`): a loop that stops progressing is stopped with a report of what
each task waits on; one that progresses, however slowly, is left alone."""

from __future__ import annotations

import asyncio
import time

import pytest

from agentrl.deadline import AdaptiveDeadline
from agentrl.trainer.watchdog import RunStalledError, Watchdog


def make(tmp_path, progress: list[float | None], limit: float = 0.4) -> Watchdog:
    return Watchdog(
        AdaptiveDeadline(explicit=limit),
        progress=lambda: progress,
        describe=lambda: ["policy http://127.0.0.1:9: live, 4 requests in flight, version 3"],
        report_path=tmp_path / "stall_report.txt",
        interval=0.05,
    )


async def test_a_loop_that_makes_no_progress_stops_with_a_report_of_what_each_task_waits_on(tmp_path) -> None:
    never = asyncio.Event()

    async def generate() -> None:
        await never.wait()

    async def loop() -> None:
        requests = [asyncio.create_task(generate(), name=f"trajectory-{i}") for i in range(2)]
        await asyncio.gather(*requests)

    dog = make(tmp_path, [None])
    started = time.monotonic()
    with pytest.raises(RunStalledError, match="no progress for 0.[0-9] s .*4 requests in flight.*stall_report.txt"):
        await dog.guard(loop())
    assert time.monotonic() - started < 2 * 0.4 + 0.5
    report = (tmp_path / "stall_report.txt").read_text()
    assert "trajectory-0: " in report and "generate (test_watchdog.py:" in report
    assert "4 requests in flight" in report


async def test_a_slow_loop_that_progresses_is_left_alone(tmp_path) -> None:
    progress: list[float | None] = [None]

    async def slow() -> str:
        for _ in range(10):  # 1 s in all, 2.5 deadlines, with progress every 0.1 s
            await asyncio.sleep(0.1)
            progress[0] = time.monotonic()
        return "done"

    assert await make(tmp_path, progress).guard(slow()) == "done"
    assert not (tmp_path / "stall_report.txt").exists()


def test_the_deadline_follows_the_slowest_step() -> None:
    deadline = AdaptiveDeadline(first=3600.0, floor=300.0, factor=3.0)
    dog = Watchdog(deadline, progress=list, describe=list, report_path=None)  # type: ignore[arg-type]
    assert deadline.seconds() == 3600.0
    dog.step_done(50.0)
    assert deadline.seconds() == 300.0
    dog.step_done(400.0)
    assert deadline.seconds() == 1200.0
