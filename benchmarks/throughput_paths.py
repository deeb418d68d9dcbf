"""How `rollout_throughput.py` measures: the workload (`Settings`, fixed prompts, seeded sampling), the two
paths a request can take to a server (`client`: agentrl's `LLMClient`; `raw`: the same JSON body over a bare
aiohttp session), one timed closed-loop measurement, and every round of both paths at one concurrency (`Point`).
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from agentrl.rollout.client import LLMClient
from agentrl.rollout.completions import completion_body
from agentrl.rollout.protocol import SamplingParams

PATHS = ("client", "raw")


@dataclass(frozen=True)
class Settings:
    """The workload of one run (see the module docstring)."""

    concurrencies: tuple[int, ...] = (1, 8, 32, 64)
    max_tokens: int = 24
    rounds: int = 2
    """Measured rounds of each path per concurrency, interleaved a b b a ..."""
    waves: int = 1
    """Requests per measurement: `max(waves * c, min_requests)`."""
    min_requests: int = 3
    prompt_len: int = 32
    n_prompts: int = 16
    seed: int = 0
    ignore_eos: bool = True
    max_model_len: int = 512
    """Context length the servers are started with (prompt + generation needs far less)."""

    def requests(self, concurrency: int) -> int:
        return max(self.waves * concurrency, self.min_requests)


FULL = Settings()
QUICK = Settings(concurrencies=(1, 4), max_tokens=4, rounds=2, waves=1, min_requests=2, prompt_len=16, n_prompts=4)


# ---- the workload -------------------------------------------------------------------------------------------


def make_prompts(n: int, length: int, seed: int = 0, low: int = 1000, high: int = 30000) -> list[list[int]]:
    """`n` fixed prompts of `length` token ids, drawn (seeded) from `[low, high)`: inside any real vocabulary."""
    rng = random.Random(seed)
    return [[rng.randrange(low, high) for _ in range(length)] for _ in range(n)]


def sampling_for(settings: Settings, index: int, max_tokens: int | None = None) -> SamplingParams:
    """The sampling of request `index`: temperature 1.0, seed `settings.seed + index`."""
    tokens = max_tokens or settings.max_tokens
    return SamplingParams(temperature=1.0, top_p=1.0, top_k=-1, max_tokens=tokens, seed=settings.seed + index)


def extra_body(settings: Settings) -> dict[str, Any]:
    """Request fields beyond `SamplingParams` that both paths send."""
    return {"ignore_eos": True} if settings.ignore_eos else {}


def raw_body(prompt_ids: list[int], sampling: SamplingParams, extra: dict[str, Any]) -> dict[str, Any]:
    """The JSON body of the raw path: exactly what `LLMClient.generate` sends (plus `extra`)."""
    return {**completion_body(prompt_ids, sampling), **extra}


class ExtraBodyClient(LLMClient):
    """`LLMClient` that merges fixed fields (here `ignore_eos`) into every request body; nothing else differs."""

    def __init__(self, servers: str, extra: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(servers, **kwargs)
        self.extra = dict(extra)

    async def _post(self, path: str, body: dict[str, Any], session_id: str | None) -> tuple[str, Any]:
        return await super()._post(path, {**body, **self.extra}, session_id)


def make_client(url: str, settings: Settings) -> LLMClient:
    """The client of the `client` path: no retries (a failure must fail the run, not be re-sent)."""
    extra = extra_body(settings)
    if extra:
        return ExtraBodyClient(url, extra, max_retries=0)
    return LLMClient(url, max_retries=0)


def make_raw_session() -> aiohttp.ClientSession:
    """The raw path's aiohttp session: the same connector limits and timeouts as `LLMClient`'s own."""
    connector = aiohttp.TCPConnector(limit=8192, keepalive_timeout=4.0)
    return aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=600.0, sock_connect=10.0))


# ---- one measurement --------------------------------------------------------------------------------------

OneRequest = Callable[[int], Awaitable[int]]
"""Sends request `index` and returns how many tokens it generated."""


@dataclass
class Measurement:
    """One round of one path at one concurrency."""

    path: str
    concurrency: int
    requests: int
    tokens: int
    wall_s: float
    cpu_s: float
    short: int
    """Requests that generated fewer than `max_tokens` tokens."""

    @property
    def tok_s(self) -> float:
        return self.tokens / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def cpu_ms_per_request(self) -> float:
        return 1000.0 * self.cpu_s / max(1, self.requests)


async def drive(n: int, concurrency: int, one: OneRequest) -> list[int]:
    """Sends requests `0..n-1`, `concurrency` at a time (closed loop); their token counts, by index."""
    counts = [0] * n
    next_index = 0

    async def worker() -> None:
        nonlocal next_index
        while next_index < n:
            index = next_index
            next_index += 1
            counts[index] = await one(index)

    await asyncio.gather(*(worker() for _ in range(min(concurrency, n))))
    return counts


async def measure(path: str, n: int, concurrency: int, max_tokens: int, one: OneRequest) -> Measurement:
    """Times `drive(n, concurrency, one)`: wall clock, and this process's CPU."""
    wall0, cpu0 = time.perf_counter(), time.process_time()
    counts = await drive(n, concurrency, one)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    short = sum(c < max_tokens for c in counts)
    return Measurement(path, concurrency, n, sum(counts), wall, cpu, short)


class Paths:
    """The two ways of sending request `index` of a workload to one server: `client` and `raw`."""

    def __init__(self, url: str, settings: Settings, client: LLMClient, raw: aiohttp.ClientSession) -> None:
        self.url = url.rstrip("/")
        self.settings = settings
        self.client = client
        self.raw = raw
        self.prompts = make_prompts(settings.n_prompts, settings.prompt_len, settings.seed)
        self.extra = extra_body(settings)

    def prompt(self, index: int) -> list[int]:
        return self.prompts[index % len(self.prompts)]

    def sender(self, path: str, max_tokens: int | None = None) -> OneRequest:
        """The `OneRequest` of `path` (`client` or `raw`)."""

        async def via_client(index: int) -> int:
            sampling = sampling_for(self.settings, index, max_tokens)
            out = await self.client.generate(self.prompt(index), sampling, session_id=f"bench-{index}")
            return len(out.token_ids)

        async def via_raw(index: int) -> int:
            body = raw_body(self.prompt(index), sampling_for(self.settings, index, max_tokens), self.extra)
            async with self.raw.post(self.url + "/v1/completions", json=body) as response:
                status, raw = response.status, await response.read()
            if status != 200:
                raise RuntimeError(f"raw POST to {self.url} answered HTTP {status}: {raw[:300]!r}")
            data = json.loads(raw)
            return len(data["choices"][0]["token_ids"])

        return {"client": via_client, "raw": via_raw}[path]

    async def run(self, path: str, concurrency: int) -> Measurement:
        n = self.settings.requests(concurrency)
        return await measure(path, n, concurrency, self.settings.max_tokens, self.sender(path))

    async def warm_up(self) -> None:
        """One short request per prompt on each path (connections, server warm-up, prefix caches)."""
        n = len(self.prompts)
        for path in PATHS:
            await drive(n, n, self.sender(path, max_tokens=2))


def round_order(rounds: int) -> list[str]:
    """`a b b a a b ...`: each path as often first as second, over pairs of rounds."""
    order: list[str] = []
    for r in range(rounds):
        order += list(PATHS) if r % 2 == 0 else list(reversed(PATHS))
    return order


@dataclass
class Point:
    """Every round of both paths at one concurrency."""

    concurrency: int
    rounds: dict[str, list[Measurement]] = field(default_factory=lambda: {p: [] for p in PATHS})

    def best(self, path: str) -> Measurement:
        return max(self.rounds[path], key=lambda m: m.tok_s)

    @property
    def client_over_raw(self) -> float:
        raw = self.best("raw").tok_s
        return self.best("client").tok_s / raw if raw > 0 else float("nan")
