"""The run's watchdog: a run that makes no progress stops with a report instead of waiting forever.

Progress is any request completed by a rollout server, any trajectory finished, any training step done. When
none happens for longer than the run's own steps take (an `AdaptiveDeadline` fed by each step's duration: 3x the
slowest so far, at least 5 minutes; before the first, twice `rollout.trajectory_timeout_s`, a bound no healthy
trajectory passes; `trainer.stall_timeout_s` to fix it), the watchdog writes what each waiting task waits on, and
each rollout replica's state, to `stall_report.txt` in the run directory, stops the run, and the trainer saves its
state for `trainer.resume=true`. Stalls that can be recovered from are recovered before it comes to this: a
replica that stops answering is cut off and its requests retried elsewhere (`agentrl.rollout.stall`), a weight push
past its deadline drops its server (`agentrl.trainer.sync`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from agentrl.deadline import AdaptiveDeadline
from agentrl.errors import InfrastructureError

T = TypeVar("T")


class RunStalledError(InfrastructureError):
    """Nothing progressed for longer than the run's deadline; the report says what each task waited on."""


class Watchdog:
    """Runs the trainer's loop and stops it when nothing progresses (see the module doc).

    Args:
        deadline: seconds without progress before the run stops.
        progress: the `time.monotonic()` of the latest progress of each kind (None: none yet).
        describe: lines about the rollout (replicas, requests in flight) for the report.
        report_path: where the report is written.
        interval: seconds between checks.
    """

    def __init__(
        self,
        deadline: AdaptiveDeadline,
        progress: Callable[[], list[float | None]],
        describe: Callable[[], list[str]],
        report_path: Path,
        interval: float = 1.0,
    ) -> None:
        self.deadline = deadline
        self.progress = progress
        self.describe = describe
        self.report_path = report_path
        self.interval = interval
        self.started = time.monotonic()
        self.stalled: str | None = None

    def step_done(self, seconds: float) -> None:
        """A training step finished after `seconds` (the deadline follows the slowest)."""
        self.deadline.observe(seconds)

    async def guard(self, work: Coroutine[Any, Any, T]) -> T:
        """Run `work`; raise `RunStalledError` (after cancelling it) when nothing progresses past the deadline."""
        task = asyncio.ensure_future(work)
        watcher = asyncio.ensure_future(self._watch(task))
        try:
            return await task
        except asyncio.CancelledError:
            if self.stalled is None:
                raise
            raise RunStalledError(self.stalled) from None
        finally:
            watcher.cancel()

    def quiet_seconds(self, now: float | None = None) -> float:
        """Seconds since the latest progress of any kind (or since the start)."""
        now = time.monotonic() if now is None else now
        return now - max([self.started, *(t for t in self.progress() if t is not None)])

    async def _watch(self, task: asyncio.Task[Any]) -> None:
        while not task.done():
            await asyncio.sleep(self.interval)
            quiet, limit = self.quiet_seconds(), self.deadline.seconds()
            if quiet > limit:
                self.stalled = self._report(quiet, limit, task)
                task.cancel()
                return

    def _report(self, quiet: float, limit: float, main: asyncio.Task[Any]) -> str:
        lines = [
            f"nothing progressed for {quiet:.1f} s (the deadline is {limit:.0f} s): no request completed, no "
            "trajectory finished, no step done",
            "",
            "rollout:",
            *(f"  {line}" for line in self.describe()),
            "",
            "waiting tasks (each with where it waits):",
        ]
        for task in sorted(asyncio.all_tasks(), key=lambda t: t.get_name()):
            if task is asyncio.current_task() or task.done():
                continue
            lines.append(f"  {task.get_name()}: {waits_on(task)}")
        self.report_path.parent.mkdir(parents=True, exist_ok=True)
        self.report_path.write_text("\n".join(lines) + "\n")
        rollout = "; ".join(self.describe()[:4])
        return (
            f"the run made no progress for {quiet:.1f} s (deadline {limit:.1f} s; trainer.stall_timeout_s sets it). "
            f"Rollout: {rollout or 'nothing running'}. What each task waited on: {self.report_path}"
        )


def waits_on(task: asyncio.Task[Any], depth: int = 3) -> str:
    """Where a task is suspended: the innermost `depth` frames of its chain of awaits, outermost first (`generate
    (client.py:297) > wait (locks.py:213)`), led by the innermost agentrl frame when that is further out, and what
    the innermost awaits."""
    coro: Any = task.get_coro()
    frames: list[tuple[str, bool]] = []
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is not None:
            path = Path(frame.f_code.co_filename)
            frames.append((f"{frame.f_code.co_name} ({path.name}:{frame.f_lineno})", "agentrl" in path.parts))
        nxt = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
        if nxt is None or nxt is coro:
            break
        coro = nxt
    shown = [name for name, _ in frames[-depth:]]
    ours = [name for name, own in frames if own]
    if ours and ours[-1] not in shown:
        shown = [ours[-1], "...", *shown[-2:]]
    awaited = type(coro).__name__ if coro is not None else "nothing"
    return " > ".join(shown) + f" awaiting {awaited}" if shown else f"awaiting {awaited}"
