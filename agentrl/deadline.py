"""Deadlines derived from a run's own measured times, so that a wait that will never end is noticed without
mistaking a slow but healthy operation (a SWE step, a cold server's first load) for a stall."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class AdaptiveDeadline:
    """Seconds an operation may take: `explicit` when set; else `factor` × the slowest one seen so far, at least
    `floor`; before any was seen, `first` (the first of a kind pays for cold starts).

    Example: a weight push that took 2 s and 3 s gets `max(30, 5 × 3) = 30` s before the next is declared stuck.
    """

    explicit: float | None = None
    first: float = 600.0
    floor: float = 30.0
    factor: float = 5.0
    slowest: float | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def seconds(self) -> float:
        """The deadline of the next operation."""
        if self.explicit is not None:
            return self.explicit
        with self._lock:
            return self.first if self.slowest is None else max(self.floor, self.factor * self.slowest)

    def observe(self, seconds: float) -> None:
        """Record how long one operation took."""
        with self._lock:
            self.slowest = seconds if self.slowest is None else max(self.slowest, seconds)


class Countdown:
    """One deadline shared by the steps of an operation: each step may take only what the earlier ones left.

    An update made of several requests (vLLM's pause, reload, cache reset, version label, resume) then ends within
    its deadline, rather than within one deadline per request.

    Example::

        countdown = Countdown(30.0, "the weight update of vLLM at http://host:8000")
        http.post("/pause", timeout=countdown.left("pause"))
        http.post("/collective_rpc", json=rpc, timeout=countdown.left("reload"))
    """

    def __init__(self, seconds: float, what: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds, self.what, self._clock = seconds, what, clock
        self._end = clock() + seconds

    def left(self, step: str) -> float:
        """Seconds left for `step`.

        Raises:
            TimeoutError: none are left; the message names the operation, its deadline and the step.
        """
        left = self._end - self._clock()
        if left <= 0:
            raise TimeoutError(f"{self.what} took longer than its deadline of {self.seconds:g} s (before {step})")
        return left

    def left_at_least(self, seconds: float) -> float:
        """Seconds left, but at least `seconds`: for a step that must still be tried after a failure (resuming a
        paused server), which may overrun the deadline by that much."""
        return max(seconds, self._end - self._clock())
