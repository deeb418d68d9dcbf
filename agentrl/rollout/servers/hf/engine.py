"""`HFEngine`: the asyncio-facing continuous-batching engine of the `hf` server.

Requests are validated here, then queued to a `Scheduler`, whose background thread runs the step loop over an
`EngineCore` (see those modules); results come back to the caller's event loop through thread-safe futures.
Cancelling a `generate()` call aborts its request.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch
from transformers import PreTrainedModel

from agentrl.rollout.protocol import SamplingParams
from agentrl.rollout.servers.hf.adapters import adapter_pairs
from agentrl.rollout.servers.hf.core import EngineCore
from agentrl.rollout.servers.hf.loading import eos_token_ids, load_model, load_tokenizer
from agentrl.rollout.servers.hf.request import GenerationOutput, GenRequest, RequestError, TopLogprobs
from agentrl.rollout.servers.hf.scheduler import Scheduler, WeightJob
from agentrl.rollout.servers.hf.weights import Weights, WeightUpdateError, base_state, validate_state_dict
from agentrl.weight_delta import WeightDelta, weights_digest

StreamedToken = tuple[int, float, TopLogprobs | None]
"""One sampled token: its id, its logprob and the top alternatives (when asked for)."""


@dataclass
class EngineConfig:
    """Limits of the engine. `max_model_len` defaults to the model's `max_position_embeddings`."""

    max_batch_size: int = 64
    max_model_len: int | None = None
    max_prefill_tokens: int = 16384
    policy_version: int = 0


class HFEngine:
    """Continuous-batching generation engine around a transformers causal LM (see module docstring)."""

    def __init__(self, model: PreTrainedModel, tokenizer: Any = None, config: EngineConfig | None = None) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.config = cfg = config or EngineConfig()
        pad = getattr(tokenizer, "pad_token_id", None)
        self.core = EngineCore(model, eos_token_ids(model, tokenizer), tokenizer, pad if pad is not None else 0)
        self.vocab_size = int(model.get_input_embeddings().weight.shape[0])  # type: ignore[operator,index]
        self.max_model_len = int(cfg.max_model_len or model.config.max_position_embeddings)
        self.scheduler = Scheduler(self.core, tokenizer, cfg.max_batch_size, cfg.max_prefill_tokens, cfg.policy_version)

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
        return self.scheduler.version

    @property
    def weights_id(self) -> str:
        """The id of the weights loaded, which a delta must name as its base."""
        return self.scheduler.weights_id

    @property
    def weights_dtype(self) -> str:
        """The dtype the model's weights are held in (`bfloat16`, `float32`...): a delta is in it."""
        return str(next(self.model.parameters()).dtype).removeprefix("torch.")

    def weights_digest(self) -> str:
        """A hash of the base model's weights (`agentrl.weight_delta.weights_digest`), never of half an update."""
        with self.scheduler.weights_lock:
            return weights_digest(base_state(self.model))

    @property
    def adapter_versions(self) -> dict[str, int]:
        """The LoRA adapters loaded (`policies.X.lora_of`) and the version each one serves."""
        return dict(self.core.adapters.versions)

    def serves_adapter(self, name: str) -> bool:
        return name in self.core.adapters

    @property
    def num_running(self) -> int:
        return len(self.core.running)

    @property
    def num_waiting(self) -> int:
        return len(self.scheduler.waiting)

    def start(self) -> None:
        """Start the engine thread (idempotent)."""
        self.scheduler.start()

    def shutdown(self, timeout: float = 30.0) -> None:
        """Stop the engine thread; unfinished requests fail with `EngineShutdownError`."""
        self.scheduler.stop(timeout)

    def check_prompt(self, prompt_ids: Sequence[int], max_tokens: int, adapter: str | None = None) -> None:
        """Raise `RequestError` for an empty prompt, unknown token ids, prompt + max_tokens over the context, or an
        adapter that is not loaded."""
        if adapter is not None and not self.serves_adapter(adapter):
            raise RequestError(f"LoRA adapter {adapter!r} is not loaded; loaded: {sorted(self.adapter_versions)}")
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
        adapter: str | None = None,
    ) -> GenerationOutput:
        """Generate a completion for `prompt_ids` (through LoRA `adapter` when set); cancelling the awaiting task
        aborts the request."""
        self.check_prompt(prompt_ids, sampling.max_tokens, adapter)
        fut, on_done = _threadsafe_future()
        req = self._request(prompt_ids, sampling, on_done, request_id, top_logprobs, ignore_eos, adapter)
        self.scheduler.submit(req)
        try:
            return await fut
        except asyncio.CancelledError:
            self._abandon(req)
            raise

    def stream(
        self,
        prompt_ids: Sequence[int],
        sampling: SamplingParams,
        *,
        request_id: str | None = None,
        top_logprobs: int = 0,
        ignore_eos: bool = False,
        adapter: str | None = None,
    ) -> AsyncIterator[list[StreamedToken] | GenerationOutput]:
        """Generate as `generate` does, yielding the tokens as they are sampled (in lists: those sampled since the
        last yield), then the `GenerationOutput`. The prompt is checked (and the request queued) at once, so a bad
        request raises `RequestError` here; leaving the iteration early aborts the request."""
        self.check_prompt(prompt_ids, sampling.max_tokens, adapter)
        loop = asyncio.get_running_loop()
        events: asyncio.Queue[Any] = asyncio.Queue()

        def put(*event: Any) -> None:
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody is reading any more
                loop.call_soon_threadsafe(events.put_nowait, event[0] if len(event) == 1 else event)

        req = self._request(prompt_ids, sampling, put, request_id, top_logprobs, ignore_eos, adapter)
        req.on_token = put
        self.scheduler.submit(req)
        return self._events(req, events)

    async def _events(
        self, req: GenRequest, events: asyncio.Queue[Any]
    ) -> AsyncIterator[list[StreamedToken] | GenerationOutput]:
        try:
            while True:
                tokens: list[StreamedToken] = []
                event = await events.get()
                while isinstance(event, tuple):
                    tokens.append(event)
                    event = events.get_nowait() if not events.empty() else None
                if tokens:
                    yield tokens
                if isinstance(event, BaseException):
                    raise event
                if isinstance(event, GenerationOutput):
                    yield event
                    return
        finally:
            if req.finish_reason is None:
                self._abandon(req)

    def _request(
        self,
        prompt_ids: Sequence[int],
        sampling: SamplingParams,
        on_done: Callable[[Any], None],
        request_id: str | None,
        top_logprobs: int,
        ignore_eos: bool,
        adapter: str | None = None,
    ) -> GenRequest:
        return GenRequest(
            request_id=request_id or uuid.uuid4().hex,
            prompt_ids=list(prompt_ids),
            sampling=sampling,
            on_done=on_done,
            top_logprobs=top_logprobs,
            ignore_eos=ignore_eos,
            generator=self._generator(sampling.seed),
            adapter=adapter,
        )

    def _abandon(self, req: GenRequest) -> None:
        req.aborted = True
        self.scheduler.wake()

    def abort(self, request_id: str | None = None) -> int:
        """Abort the request(s) with `request_id` (all requests if None); return how many were found."""
        return self.scheduler.abort(request_id)

    async def update_weights(
        self,
        state: Weights,
        version: int | None = None,
        in_flight: Literal["finish", "abort"] = "finish",
        adapter: str | None = None,
        lora_alpha: float = 16.0,
        weights_id: str | None = None,
    ) -> int:
        """Load `state` in place once the in-flight requests it changes finish (or are aborted); return the new
        version. With `adapter`, `state` is that LoRA adapter's tensors (created by its first update) and the
        version is the adapter's own. `state` may be a `WeightDelta` on top of the weights held (its own version
        and id; `DeltaBaseMismatchError` when the server holds other weights); `weights_id` names a full state.

        New requests wait while the update is pending. `version=None` bumps the current version by one.
        """
        if isinstance(state, WeightDelta):
            if adapter is not None:
                raise WeightUpdateError("a LoRA adapter is pushed whole (its tensors are small); send no delta")
        elif adapter is None:
            validate_state_dict(self.model, state)
        else:
            adapter_pairs(state)
        fut, on_done = _threadsafe_future()
        job = WeightJob(state, version, in_flight == "abort", on_done, adapter, lora_alpha, weights_id)
        self.scheduler.submit_weights(job)
        return await fut

    def _generator(self, seed: int | None) -> torch.Generator:
        gen = torch.Generator(device=self.core.device)
        gen.manual_seed(seed if seed is not None else random.getrandbits(63))
        return gen


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
