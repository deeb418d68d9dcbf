"""`HFEngine`: asyncio-facing continuous batching over `EngineCore`, run by one background thread.

At every step boundary the engine thread retires aborted requests, applies a pending weight update once no
request is running (admission is paused while one is pending), admits waiting requests into free batch slots
(prefilled together), then runs one decode step for the whole running batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import threading
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch

from agentrl.rollout.protocol import SamplingParams
from agentrl.rollout.servers.hf.core import EngineCore
from agentrl.rollout.servers.hf.loading import eos_token_ids, load_model, load_tokenizer
from agentrl.rollout.servers.hf.request import EngineShutdownError, GenerationOutput, GenRequest, RequestError
from agentrl.rollout.servers.hf.weights import StateDict, load_into, validate_state_dict

log = logging.getLogger(__name__)


@dataclass
class EngineConfig:
    """Limits of the engine. `max_model_len` defaults to the model's `max_position_embeddings`."""

    max_batch_size: int = 64
    max_model_len: int | None = None
    max_prefill_tokens: int = 16384
    policy_version: int = 0


@dataclass
class _WeightJob:
    state: StateDict
    version: int | None
    abort_in_flight: bool
    on_done: Callable[[Any], None]


class HFEngine:
    """Continuous-batching generation engine around a transformers causal LM (see module docstring)."""

    def __init__(self, model: torch.nn.Module, tokenizer: Any = None, config: EngineConfig | None = None) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.config = config or EngineConfig()
        pad = getattr(tokenizer, "pad_token_id", None)
        self.core = EngineCore(model, eos_token_ids(model, tokenizer), tokenizer, pad if pad is not None else 0)
        self.vocab_size = int(model.get_input_embeddings().weight.shape[0])
        self.max_model_len = int(self.config.max_model_len or model.config.max_position_embeddings)
        self._version = self.config.policy_version
        self._waiting: deque[GenRequest] = deque()
        self._weight_jobs: deque[_WeightJob] = deque()
        self._cv = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None

    @classmethod
    def from_pretrained(
        cls, path: str, *, dtype: str = "float32", device: str | None = None, config: EngineConfig | None = None
    ) -> HFEngine:
        """Load model and tokenizer from an HF folder and return a started engine."""
        engine = cls(load_model(path, dtype, device), load_tokenizer(path), config)
        engine.start()
        return engine

    @property
    def policy_version(self) -> int:
        """Version of the weights currently loaded."""
        return self._version

    @property
    def num_running(self) -> int:
        return len(self.core.running)

    @property
    def num_waiting(self) -> int:
        return len(self._waiting)

    def start(self) -> None:
        """Start the engine thread (idempotent)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="hf-engine", daemon=True)
            self._thread.start()

    def shutdown(self, timeout: float = 30.0) -> None:
        """Stop the engine thread; unfinished requests fail with `EngineShutdownError`."""
        with self._cv:
            self._stopping = True
            self._cv.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def check_prompt(self, prompt_ids: Sequence[int], max_tokens: int) -> None:
        """Raise `RequestError` for an empty prompt, unknown token ids, or prompt + max_tokens over the context."""
        if not prompt_ids:
            raise RequestError("The prompt is empty.")
        bad = next((t for t in prompt_ids if not 0 <= t < self.vocab_size), None)
        if bad is not None:
            raise RequestError(f"Prompt token id {bad} is out of range for the vocabulary ({self.vocab_size}).")
        total = len(prompt_ids) + max_tokens
        if total > self.max_model_len:
            raise RequestError(
                f"This model's maximum context length is {self.max_model_len} tokens. However, you requested "
                f"{total} tokens ({len(prompt_ids)} in the prompt, {max_tokens} for the completion). "
                "Please reduce the length of the prompt or max_tokens."
            )

    async def generate(
        self,
        prompt_ids: Sequence[int],
        sampling: SamplingParams,
        *,
        request_id: str | None = None,
        top_logprobs: int = 0,
        ignore_eos: bool = False,
    ) -> GenerationOutput:
        """Generate a completion for `prompt_ids`; cancelling the awaiting task aborts the request."""
        self.check_prompt(prompt_ids, sampling.max_tokens)
        fut, on_done = _threadsafe_future()
        req = GenRequest(
            request_id=request_id or uuid.uuid4().hex,
            prompt_ids=list(prompt_ids),
            sampling=sampling,
            on_done=on_done,
            top_logprobs=top_logprobs,
            ignore_eos=ignore_eos,
            generator=self._generator(sampling.seed),
        )
        self.submit(req)
        try:
            return await fut
        except asyncio.CancelledError:
            req.aborted = True
            self._wake()
            raise

    def submit(self, req: GenRequest) -> None:
        """Queue a request (thread-safe); `req.on_done` fires when it finishes."""
        with self._cv:
            if self._stopping:
                raise EngineShutdownError("the engine is shut down")
            self._waiting.append(req)
            self._cv.notify()

    def abort(self, request_id: str | None = None) -> int:
        """Abort the request(s) with `request_id` (all requests if None); return how many were found."""
        with self._cv:
            reqs = [*self._waiting, *list(self.core.running)]
            hits = [r for r in reqs if request_id is None or r.request_id == request_id]
            for r in hits:
                r.aborted = True
            self._cv.notify()
        return len(hits)

    async def update_weights(
        self, state: StateDict, version: int | None = None, in_flight: Literal["finish", "abort"] = "finish"
    ) -> int:
        """Load `state` in place once in-flight requests finish (or are aborted); return the new version."""
        validate_state_dict(self.model, state)
        fut, on_done = _threadsafe_future()
        with self._cv:
            self._weight_jobs.append(_WeightJob(state, version, in_flight == "abort", on_done))
            self._cv.notify()
        return await fut

    def _generator(self, seed: int | None) -> torch.Generator:
        gen = torch.Generator(device=self.core.device)
        gen.manual_seed(seed if seed is not None else random.getrandbits(63))
        return gen

    def _wake(self) -> None:
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
            pending, self._waiting = list(self._waiting), deque()
            jobs, self._weight_jobs = list(self._weight_jobs), deque()
        self._fail([*self.core.clear(), *pending], EngineShutdownError("the engine shut down"))
        for job in jobs:
            job.on_done(EngineShutdownError("the engine shut down"))

    def _wait_for_work(self) -> bool:
        with self._cv:
            while not (self._stopping or self._waiting or self._weight_jobs or self.core.running):
                self._cv.wait()
            return not self._stopping

    def _step(self) -> None:
        self._retire_aborted()
        if self._weight_jobs and self._apply_weight_job():
            return
        admitted = [] if self._weight_jobs else self._admit()
        if admitted:
            try:
                self._complete(self.core.prefill(admitted))
            except Exception as exc:
                self._fail([r for r in admitted if r.finish_reason is None], RuntimeError(repr(exc)))
                raise
        self._complete(self.core.decode())

    def _retire_aborted(self) -> None:
        with self._cv:
            dropped = [r for r in self._waiting if r.aborted]
            if dropped:
                self._waiting = deque(r for r in self._waiting if not r.aborted)
        running = [r for r in self.core.running if r.aborted]
        if running:
            self.core.remove(running)
        for req in [*dropped, *running]:
            req.finish("abort")
        self._complete([*dropped, *running])

    def _apply_weight_job(self) -> bool:
        """Apply the oldest weight job once nothing runs; True if one was applied."""
        job = self._weight_jobs[0]
        if job.abort_in_flight and self.core.running:
            for req in self.core.running:
                req.aborted = True
            self._retire_aborted()
        if self.core.running:
            return False
        try:
            load_into(self.model, job.state)
            self._version = job.version if job.version is not None else self._version + 1
            job.on_done(self._version)
        except Exception as exc:
            job.on_done(exc)
        with self._cv:
            self._weight_jobs.popleft()
        return True

    def _admit(self) -> list[GenRequest]:
        """Pop waiting requests that fit in the free slots and the prefill token budget."""
        free = self.config.max_batch_size - len(self.core.running)
        admitted: list[GenRequest] = []
        longest = 0
        with self._cv:
            while self._waiting and len(admitted) < free:
                nxt = self._waiting[0]
                longest_if = max(longest, len(nxt.prompt_ids))
                if admitted and longest_if * (len(admitted) + 1) > self.config.max_prefill_tokens:
                    break
                admitted.append(self._waiting.popleft())
                longest = longest_if
        return admitted

    def _complete(self, reqs: Sequence[GenRequest]) -> None:
        for req in reqs:
            req.on_done(req.to_output(self._version, self.tokenizer))

    def _fail(self, reqs: Sequence[GenRequest], exc: BaseException) -> None:
        for req in reqs:
            req.on_done(exc)


def _threadsafe_future() -> tuple[asyncio.Future[Any], Callable[[Any], None]]:
    """A future of the running loop and a callback that resolves it from any thread (exceptions raise)."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[Any] = loop.create_future()

    def settle(result: Any) -> None:
        if fut.done():
            return
        if isinstance(result, BaseException):
            fut.set_exception(result)
        else:
            fut.set_result(result)

    def on_done(result: Any) -> None:
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
            loop.call_soon_threadsafe(settle, result)

    return fut, on_done
