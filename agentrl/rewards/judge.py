"""LLM judge: a rubric prompt to any litellm model (a provider, or an OpenAI-compatible `api_base` such as our
own rollout server), the verdict parsed into [0, 1].

    - name: judge
      type: judge
      model: openai/judge                    # litellm model string; openai/<any> + api_base for a local server
      api_base: http://127.0.0.1:8000/v1
      rubric: "Is the answer correct and concise?"
      max_concurrency: 8                     # judge calls in flight
      retries: 2                             # extra attempts after an error, a timeout or an unreadable verdict

Identical (prompt, response, rubric, reference) requests are answered from an in-memory LRU cache. When every
attempt fails the judge raises `RewardError` with the attempts in its details, and the pipeline applies its
failure policy (`zero` or `skip`).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import threading
from collections import OrderedDict
from typing import Any

from agentrl.rewards.aio import LoopSemaphore
from agentrl.rewards.base import RewardComponent, RewardError, RewardInput, RewardResult
from agentrl.rewards.verdict import parse_score

DEFAULT_RUBRIC = "Judge whether the response correctly and helpfully answers the question."
SYSTEM_PROMPT = "You are a strict, impartial grader. You reply with a score only."
TEMPLATE = """Question:
{prompt}

Reference answer:
{reference}

Response to grade:
{response}

Rubric: {rubric}

Rate the response from 0 to {scale}. Reply with "Score: N" only."""


class VerdictCache:
    """A thread-safe LRU map from request keys to judged scores."""

    def __init__(self, max_size: int = 10000) -> None:
        self.max_size = max_size
        self._items: OrderedDict[str, tuple[float, str]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0

    @staticmethod
    def key(*parts: str) -> str:
        return hashlib.sha256(json.dumps(parts).encode()).hexdigest()

    def get(self, key: str) -> tuple[float, str] | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
                self.hits += 1
            return value

    def put(self, key: str, value: tuple[float, str]) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.max_size:
                self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)


class LLMJudge(RewardComponent):
    """Scores a trajectory's final answer with an LLM and a rubric.

    Args:
        model: litellm model string (`openai/<name>` for an OpenAI-compatible server at `api_base`).
        api_base: base URL of an OpenAI-compatible server (…/v1), or None for the provider's default.
        api_key: the key; default the `api_key_env` variable, else "EMPTY" when `api_base` is set.
        api_key_env: environment variable holding the key.
        rubric: what a good response is; part of the prompt and of the cache key.
        template: user prompt with `{prompt}`, `{response}`, `{reference}`, `{rubric}`, `{scale}` placeholders.
        system_prompt: the system message (None: no system message).
        scale: the top of the score range the judge is asked for (`Score: N` is divided by it).
        max_tokens, temperature: sampling of the verdict.
        retries: extra attempts after an error, timeout or unreadable verdict.
        backoff_s: wait before the first retry (doubled each time).
        request_timeout_s: limit of one judge call.
        max_concurrency: judge calls in flight at once (per event loop).
        cache: answer repeated requests from memory; cache_size: entries kept.
        completion_kwargs: extra arguments for `litellm.acompletion`.
    """

    def __init__(
        self,
        model: str = "openai/judge",
        api_base: str | None = None,
        api_key: str | None = None,
        api_key_env: str | None = None,
        rubric: str = DEFAULT_RUBRIC,
        template: str = TEMPLATE,
        system_prompt: str | None = SYSTEM_PROMPT,
        scale: float = 10.0,
        max_tokens: int = 16,
        temperature: float = 0.0,
        retries: int = 2,
        backoff_s: float = 0.5,
        request_timeout_s: float = 60.0,
        max_concurrency: int = 8,
        cache: bool = True,
        cache_size: int = 10000,
        completion_kwargs: dict[str, Any] | None = None,
    ) -> None:
        self.model = model
        self.api_base = api_base
        self.api_key = api_key or (os.environ.get(api_key_env) if api_key_env else None)
        if self.api_key is None and api_base:
            self.api_key = "EMPTY"
        self.rubric, self.template, self.system_prompt, self.scale = rubric, template, system_prompt, scale
        self.max_tokens, self.temperature = max_tokens, temperature
        self.retries, self.backoff_s, self.request_timeout_s = retries, backoff_s, request_timeout_s
        self.limit = LoopSemaphore(max_concurrency)
        self.cache = VerdictCache(cache_size) if cache else None
        self.completion_kwargs = completion_kwargs or {}
        self.calls = 0
        self._pending: dict[tuple[int, str], asyncio.Future[RewardResult]] = {}

    def messages(self, inp: RewardInput) -> list[dict[str, str]]:
        """The judge's chat messages for one trajectory."""
        fields = {
            "{prompt}": inp.question,
            "{response}": inp.answer,
            "{reference}": "(none)" if inp.ground_truth is None else str(inp.ground_truth),
            "{rubric}": self.rubric,
            "{scale}": f"{self.scale:g}",
        }
        text = self.template
        for placeholder, value in fields.items():  # plain replacement: templates may contain other braces
            text = text.replace(placeholder, value)
        system = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        return [*system, {"role": "user", "content": text}]

    async def ascore(self, inp: RewardInput) -> RewardResult:
        key = VerdictCache.key(self.model, inp.question, inp.answer, self.rubric, str(inp.ground_truth))
        if self.cache is None:
            return await self._judge(inp, key)
        if (hit := self.cache.get(key)) is not None:
            return RewardResult(hit[0], {"verdict": hit[1], "cached": True})
        # identical requests in flight (a GRPO group often repeats an answer) share one judge call
        pending = (id(asyncio.get_running_loop()), key)
        if pending in self._pending:
            result = await asyncio.shield(self._pending[pending])
            return RewardResult(result.score, {**result.details, "cached": True})
        task = asyncio.ensure_future(self._judge(inp, key))
        self._pending[pending] = task
        try:
            return await asyncio.shield(task)
        finally:
            if task.done():
                self._pending.pop(pending, None)
            else:
                task.add_done_callback(lambda _: self._pending.pop(pending, None))

    async def _judge(self, inp: RewardInput, key: str) -> RewardResult:
        messages = self.messages(inp)
        errors: list[str] = []
        for attempt in range(self.retries + 1):
            if attempt:
                await asyncio.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                async with self.limit.get():
                    text = await self.complete(messages)
            except Exception as exc:
                errors.append(_describe(exc))
                continue
            score = parse_score(text, self.scale)
            if score is None:
                errors.append(f"unreadable verdict: {text[:200]!r}")
                continue
            if self.cache is not None:
                self.cache.put(key, (score, text))
            return RewardResult(score, {"verdict": text[:500], "attempts": attempt + 1, "cached": False})
        raise RewardError(
            f"judge failed after {len(errors)} attempts: {errors[-1]}", {"attempts": len(errors), "errors": errors}
        )

    async def complete(self, messages: list[dict[str, str]]) -> str:
        """One raw judge call: the text of the reply (no retries, no parsing, no cache)."""
        litellm = _litellm()
        self.calls += 1
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "timeout": self.request_timeout_s,
            "num_retries": 0,
            "max_retries": 0,
            **self.completion_kwargs,
        }
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self.api_key:
            kwargs["api_key"] = self.api_key
        async with asyncio.timeout(self.request_timeout_s):
            response = await litellm.acompletion(**kwargs)
        content = response.choices[0].message.content
        return content if isinstance(content, str) else ""


def _litellm() -> Any:
    """litellm, imported on first use with its network-free settings (local cost map, no telemetry)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.telemetry = False
    litellm.suppress_debug_info = True
    return litellm


def _describe(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "timed out"
    text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
