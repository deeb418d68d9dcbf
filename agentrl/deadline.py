"""Deadlines derived from a run's own measured times, so that a wait that will never end is noticed without
mistaking a slow but healthy operation (a SWE step, a cold server's first load) for a stall."""

from __future__ import annotations

import threading
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
