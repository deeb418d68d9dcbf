"""The engine thread: a step loop that feeds `EngineCore` and applies weight updates between steps.

At every step boundary it retires aborted requests, applies a pending weight update once no request it changes is
running (admission is paused while one is pending; with `abort_in_flight` those are aborted first), admits
waiting requests into free batch slots (prefilled together), then runs one decode step for the whole batch.
All methods but the thread's own are thread-safe. A LoRA adapter's update (`adapter` set) changes only the
requests of that adapter and its own version; a full update changes every request (adapters sit on the base).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from agentrl.rollout.servers.hf.core import EngineCore
from agentrl.rollout.servers.hf.request import EngineShutdownError, GenRequest
from agentrl.rollout.servers.hf.weights import Weights, base_state, load_into
from agentrl.weight_delta import WeightDelta, apply_delta, check_delta

log = logging.getLogger(__name__)


@dataclass
class WeightJob:
    """A pending weight update; `on_done` gets the new version or an exception."""

    state: Weights
    version: int | None
    abort_in_flight: bool
    on_done: Callable[[Any], None]
    adapter: str | None = None
    """The LoRA adapter these weights are (None: the full model)."""
    lora_alpha: float = 16.0
    weights_id: str | None = None
    """The id a full update gives the weights (a delta carries its own); None: a new one."""


UNNAMED = ""
"""The weights id of weights that failed to load part-way: no delta's base."""


def new_weights_id() -> str:
    return uuid.uuid4().hex


class Scheduler:
    """Waiting queue, weight jobs and the background thread running the step loop over an `EngineCore`."""

    def __init__(self, core: EngineCore, detok: Any, max_batch_size: int, max_prefill_tokens: int, version: int):
        self.core = core
        self.detok = detok
        self.max_batch_size = max_batch_size
        self.max_prefill_tokens = max_prefill_tokens
        self.version = version
        self.weights_id = new_weights_id()
        """The id of the weights held: a delta applies only on top of the weights it names."""
        self.weights_lock = threading.Lock()
        """Held while weights change, so that a reader of all of them (`digest`) never sees half an update."""
        self.waiting: deque[GenRequest] = deque()
        self.weight_jobs: deque[WeightJob] = deque()
        self._cv = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the engine thread (idempotent)."""
        if self._thread is None:
            self._stopping = False
            self._thread = threading.Thread(target=self._run, name="hf-engine", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the thread; unfinished requests and weight jobs fail with `EngineShutdownError`."""
        with self._cv:
            self._stopping = True
            self._cv.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def submit(self, req: GenRequest) -> None:
        """Queue a request."""
        with self._cv:
            if self._stopping or self._thread is None:
                raise EngineShutdownError("the engine is not running")
            self.waiting.append(req)
            self._cv.notify()

    def submit_weights(self, job: WeightJob) -> None:
        """Queue a weight update."""
        with self._cv:
            if self._stopping or self._thread is None:
                raise EngineShutdownError("the engine is not running")
            self.weight_jobs.append(job)
            self._cv.notify()

    def abort(self, request_id: str | None) -> int:
        """Mark the matching waiting or running requests aborted (all if None); return how many."""
        with self._cv:
            hits = [r for r in [*self.waiting, *list(self.core.running)] if request_id in (None, r.request_id)]
            for req in hits:
                req.aborted = True
            self._cv.notify()
        return len(hits)

    def wake(self) -> None:
        with self._cv:
            self._cv.notify()

    def _run(self) -> None:
        with torch.inference_mode():
            while self._wait_for_work():
                try:
                    self._step()
                except Exception as exc:
                    log.exception("hf engine step failed")
                    self._fail(self.core.clear(), RuntimeError(f"generation failed: {exc!r}"))
        with self._cv:
            pending, self.waiting = list(self.waiting), deque()
            jobs, self.weight_jobs = list(self.weight_jobs), deque()
        self._fail([*self.core.clear(), *pending], EngineShutdownError("the engine shut down"))
        for job in jobs:
            job.on_done(EngineShutdownError("the engine shut down"))

    def _wait_for_work(self) -> bool:
        with self._cv:
            while not (self._stopping or self.waiting or self.weight_jobs or self.core.running):
                self._cv.wait()
            return not self._stopping

    def _step(self) -> None:
        self._retire_aborted()
        if self.weight_jobs and self._apply_weight_job():
            return
        admitted = [] if self.weight_jobs else self._admit()
        if admitted:
            try:
                self._complete(self.core.prefill(admitted))
            except Exception as exc:  # a later adapter group failed: the earlier groups' finished requests end too
                self._complete([r for r in admitted if r.finish_reason is not None and r not in self.core.running])
                self._fail([r for r in admitted if r.finish_reason is None], RuntimeError(repr(exc)))
                raise
        self._complete(self.core.decode())

    def _retire_aborted(self) -> None:
        with self._cv:
            dropped = [r for r in self.waiting if r.aborted]
            if dropped:
                self.waiting = deque(r for r in self.waiting if not r.aborted)
        running = [r for r in self.core.running if r.aborted]
        if running:
            self.core.remove(running)
        for req in [*dropped, *running]:
            req.finish("abort")
        self._complete([*dropped, *running])

    def _apply_weight_job(self) -> bool:
        """Apply the oldest weight job once nothing runs; True if one was applied."""
        job = self.weight_jobs[0]
        changed = [r for r in self.core.running if job.adapter in (None, r.adapter)]
        if job.abort_in_flight and changed:
            for req in changed:
                req.aborted = True
            self._retire_aborted()
        if changed:
            return False
        try:
            job.on_done(self._load(job))
        except Exception as exc:
            job.on_done(exc)
        with self._cv:
            self.weight_jobs.popleft()
        return True

    def _load(self, job: WeightJob) -> int:
        """Load a job's weights; the version it now serves."""
        if job.adapter is None:
            with self.weights_lock:
                self._load_base(job)
            return self.version
        adapters = self.core.adapters
        version = job.version if job.version is not None else adapters.versions.get(job.adapter, 0) + 1
        adapters.load(job.adapter, job.state, job.lora_alpha, version)
        return version

    def _load_base(self, job: WeightJob) -> None:
        """Load a full state or apply a delta (refused unless it is on top of the weights held)."""
        if isinstance(job.state, WeightDelta):
            target = base_state(self.core.model)
            check_delta(job.state, target, self.weights_id)  # refused before anything changes
            with self._unnamed_on_failure():
                apply_delta(job.state, target)
            self.version, self.weights_id = job.state.version, job.state.new_id
            return
        with self._unnamed_on_failure():
            load_into(self.core.model, job.state)
        self.version = job.version if job.version is not None else self.version + 1
        self.weights_id = job.weights_id or new_weights_id()

    @contextlib.contextmanager
    def _unnamed_on_failure(self) -> Iterator[None]:
        """Weights that failed to load part-way are none that a push knows: their id is cleared, so that no delta
        applies on top of them (it is refused, and the trainer pushes the full weights)."""
        try:
            yield
        except BaseException:
            self.weights_id = UNNAMED
            raise

    def version_of(self, adapter: str | None) -> int:
        """The version the base model (None) or an adapter serves."""
        return self.version if adapter is None else self.core.adapters.versions[adapter]

    def _admit(self) -> list[GenRequest]:
        """Pop waiting requests that fit in the free slots and the prefill token budget."""
        free = self.max_batch_size - len(self.core.running)
        admitted: list[GenRequest] = []
        longest = 0
        with self._cv:
            while self.waiting and len(admitted) < free:
                longest_if = max(longest, len(self.waiting[0].prompt_ids))
                if admitted and longest_if * (len(admitted) + 1) > self.max_prefill_tokens:
                    break
                admitted.append(self.waiting.popleft())
                longest = longest_if
        return admitted

    def _complete(self, reqs: Sequence[GenRequest]) -> None:
        for req in reqs:
            req.on_done(req.to_output(self.version_of(req.adapter), self.detok))

    def _fail(self, reqs: Sequence[GenRequest], exc: BaseException) -> None:
        for req in reqs:
            req.on_done(exc)
