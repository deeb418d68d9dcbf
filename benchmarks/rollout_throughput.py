"""Rollout serving throughput: generated tokens/s of the `hf` and `vllm` servers, through our client and raw.

Run from the repository root with the project's venv (`HF_HUB_OFFLINE=1`):

    .venv/bin/python benchmarks/rollout_throughput.py                     # hf and vllm, about 8 minutes
    .venv/bin/python benchmarks/rollout_throughput.py --backends hf       # one backend
    .venv/bin/python benchmarks/rollout_throughput.py --url-vllm http://127.0.0.1:8000   # a running server
    .venv/bin/python benchmarks/rollout_throughput.py --quick             # hf only, c1 and c4, few tokens
    .venv/bin/python benchmarks/rollout_throughput.py --backends hf --hf-args "--num-threads 1"

What is measured
----------------
For each backend (one at a time: a server is started on the default model, `max_model_len` 512, measured and
stopped, also on Ctrl-C or SIGTERM; two servers side by side would disturb each other on 2 cores), at each
concurrency `c` (1, 8, 32, 64):

* **client**: `LLMClient.generate(prompt_ids, SamplingParams(...), session_id)`, i.e. routing, the aiohttp
  pool, JSON, retries bookkeeping and the parse into a `TokenOutput`;
* **raw**: plain aiohttp POSTs of the very same JSON body to `/v1/completions` (one `ClientSession`, same
  connector limits), the answer read and `json.loads`-ed (the tokens have to be counted from it).

A measurement sends `max(waves * c, min_requests)` requests (defaults: one wave, at least 3), `c` at a time
(closed loop: `c` workers each sending its next request when the previous one is answered) and reports
`generated tokens / wall time`. The tokens are counted from the returned `token_ids`, never assumed. Request
`i` has prompt `i mod n_prompts` (16 fixed prompts of 32 seeded random token ids), seed `i`, temperature 1.0,
`max_tokens` 24 and `ignore_eos: true` (both our `hf` server and vLLM take it: `HFCompletionRequest` and vLLM's
`CompletionRequest`), so every request generates exactly `max_tokens` tokens and the two paths do identical
work; the table flags any request that came back shorter.

Why these sizes: on this 2-core machine both servers make ~7-14 tokens/s at concurrency 1 and ~45-90 at 32
(measured, with other jobs running), so the suggested 64 tokens and `2 * c` requests would take about 25
minutes for the two backends (4 rounds per concurrency). 24 tokens and one wave of `c` requests (3 at c=1) make
each round 5-30 s. The whole run, vLLM's start-up (40-110 s) included, is about 8 minutes when the machine is
quiet and longer when other jobs load it. With fixed lengths a wave is a full batch from its first token to its
last, so one wave already gives the steady-state figure at that concurrency.

`SamplingParams` has no `ignore_eos`, so the client path uses `ExtraBodyClient`, an `LLMClient` whose only
change is merging `{"ignore_eos": true}` into each request body before it goes to `LLMClient._post`: the
measured path is the real `LLMClient.generate`. Pass `--no-ignore-eos` to use a plain `LLMClient` (lengths
then vary with EOS, and the counts still make tokens/s exact).

The machine is small and shared, so figures are only compared side by side within one run: the client and raw
rounds alternate (a b b a ...; `rounds` of each per concurrency, after one unmeasured warm-up pass of every
prompt) so that drift hits both alike, and the best round of each path is kept (noise only ever slows a round
down). The table shows every round, and the CPU time of the benchmark process per request for each path: the
client's own cost, which on 2 cores is taken from the server. It is well under a millisecond per request for
both paths, against seconds of generation, so the client/raw ratio is 1 up to the machine's noise (which on a
loaded machine can reach +-10% per round: read it with the rounds column).

The figures (the last line printed is one JSON object)
-----------------------------------------------------
* `{backend}_tok_s_c{c}`: tokens/s through our client (the path agent loops use); `{backend}_raw_tok_s_c{c}`
  the raw figure; `client_over_raw_{backend}_c{c}` their ratio (target >= 0.95).
* `{backend}_scaling_c32_over_c1`: client tokens/s at concurrency 32 over concurrency 1 (target >= 4 for hf:
  the server must batch).
* Always present (null when a backend was not run): `hf_tok_s_c32`, `vllm_tok_s_c32`,
  `client_over_raw_vllm_c32`, `hf_scaling_c32_over_c1`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import shlex
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType
from typing import Any

if __package__ in (None, ""):  # run as a script: make `agentrl` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiohttp

from agentrl.rollout.client import LLMClient, completion_body
from agentrl.rollout.protocol import SamplingParams

BACKENDS = ("hf", "vllm")
REQUIRED_KEYS = ("hf_tok_s_c32", "vllm_tok_s_c32", "client_over_raw_vllm_c32", "hf_scaling_c32_over_c1")
PATHS = ("client", "raw")
Log = Callable[[str], None]


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


# ---- one backend ------------------------------------------------------------------------------------------


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


@dataclass
class BackendResult:
    backend: str
    url: str
    points: list[Point]


async def bench_backend(backend: str, url: str, settings: Settings, log: Log) -> BackendResult:
    """Measures both paths against the server at `url`, at every concurrency of `settings`."""
    client = make_client(url, settings)
    raw = make_raw_session()
    try:
        async with client:
            paths = Paths(url, settings, client, raw)
            await paths.warm_up()
            points = []
            for c in settings.concurrencies:
                point = Point(c)
                for path in round_order(settings.rounds):
                    m = await paths.run(path, c)
                    point.rounds[path].append(m)
                    log(f"  {backend} c={c:<3} {path:<6} {m.tok_s:8.1f} tok/s  ({m.tokens} tokens, {m.wall_s:.2f} s)")
                points.append(point)
    finally:
        await raw.close()
    return BackendResult(backend, url, points)


@contextlib.contextmanager
def server(backend: str, url: str | None, settings: Settings, log: Log, hf_args: Sequence[str] = ()) -> Iterator[str]:
    """The base URL of a server for `backend`: `url` when given, else one started here and stopped on exit.

    `hf_args` are extra command-line flags of the `hf` server (e.g. `--num-threads 1`).
    """
    if url:
        yield url.rstrip("/")
        return
    if backend == "hf":
        from agentrl.models import resolve_model
        from agentrl.rollout.servers.hf.launch import launch_hf_server

        started = time.perf_counter()
        handle = launch_hf_server(
            resolve_model("default"), max_model_len=settings.max_model_len, extra_args=list(hf_args)
        )
        try:
            log(f"hf server up at {handle.url} in {time.perf_counter() - started:.0f} s")
            yield handle.url
        finally:
            handle.stop()
        return
    if backend == "vllm":
        yield from _vllm_server(settings, log)
        return
    raise ValueError(f"unknown backend {backend!r}; choose from {', '.join(BACKENDS)}")


def _vllm_server(settings: Settings, log: Log) -> Iterator[str]:
    """`VLLMServer.launch`, unrolled so that the process is stopped even when interrupted during start-up."""
    from agentrl.models import resolve_model
    from agentrl.rollout.servers.process import ServerProcess, free_port
    from agentrl.rollout.servers.vllm import VLLMConfig, build_command, build_env, vllm_python

    cfg = VLLMConfig(max_model_len=settings.max_model_len)
    host, port = "127.0.0.1", free_port()
    cmd = build_command(vllm_python(cfg.python), resolve_model("default"), port, host, cfg)
    process = ServerProcess(cmd, env=build_env(cfg), name="vllm")
    url = f"http://{host}:{port}"
    started = time.perf_counter()
    try:
        process.start()
        process.wait_healthy(url, cfg.startup_timeout)
        log(f"vllm server up at {url} in {time.perf_counter() - started:.0f} s")
        yield url
    finally:
        process.stop()


# ---- report -----------------------------------------------------------------------------------------------


def _r(x: float, digits: int = 3) -> float | None:
    return None if x != x else round(x, digits)  # NaN -> null


def summary(results: Sequence[BackendResult]) -> dict[str, Any]:
    """The JSON figures (see the module docstring)."""
    out: dict[str, Any] = dict.fromkeys(REQUIRED_KEYS)
    for res in results:
        b = res.backend
        by_c = {p.concurrency: p for p in res.points}
        for c, p in by_c.items():
            out[f"{b}_tok_s_c{c}"] = _r(p.best("client").tok_s, 1)
            out[f"{b}_raw_tok_s_c{c}"] = _r(p.best("raw").tok_s, 1)
            out[f"client_over_raw_{b}_c{c}"] = _r(p.client_over_raw)
        top = max(by_c)
        if 1 in by_c and top > 1:
            scale_c = 32 if 32 in by_c else top
            base = by_c[1].best("client").tok_s
            out[f"{b}_scaling_c{scale_c}_over_c1"] = _r(by_c[scale_c].best("client").tok_s / base if base else 0.0)
        out[f"{b}_short_requests"] = sum(m.short for p in res.points for ms in p.rounds.values() for m in ms)
    return out


def table(results: Sequence[BackendResult], settings: Settings) -> str:
    """A readable table of every round."""
    lines = [
        f"generated tokens/s; max_tokens={settings.max_tokens}, prompt {settings.prompt_len} tokens, "
        f"ignore_eos={settings.ignore_eos}, best of {settings.rounds} interleaved rounds per path",
        f"{'backend':<7} {'conc':>4} {'reqs':>5} {'client':>9} {'raw':>9} {'cl/raw':>7} "
        f"{'cpu ms/req cl|raw':>18}  {'rounds client | raw':<30}",
    ]
    for res in results:
        base = next((p.best("client").tok_s for p in res.points if p.concurrency == 1), None)
        for p in res.points:
            cl, rw = p.best("client"), p.best("raw")
            cpu = f"{min(m.cpu_ms_per_request for m in p.rounds['client']):.2f} | "
            cpu += f"{min(m.cpu_ms_per_request for m in p.rounds['raw']):.2f}"
            rounds = " ".join(f"{m.tok_s:.0f}" for m in p.rounds["client"]) + " | "
            rounds += " ".join(f"{m.tok_s:.0f}" for m in p.rounds["raw"])
            scale = f"  x{cl.tok_s / base:.1f} vs c1" if base else ""
            lines.append(
                f"{res.backend:<7} {p.concurrency:>4} {cl.requests:>5} {cl.tok_s:>9.1f} {rw.tok_s:>9.1f} "
                f"{p.client_over_raw:>7.3f} {cpu:>18}  {rounds:<30}{scale}"
            )
        short = sum(m.short for p in res.points for ms in p.rounds.values() for m in ms)
        if short:
            lines.append(f"  ({res.backend}: {short} requests generated fewer than {settings.max_tokens} tokens)")
    return "\n".join(lines)


# ---- main -------------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--backends", default=None, help="comma-separated, from: hf,vllm (default both)")
    parser.add_argument("--url-hf", default=None, help="use this running hf server instead of starting one")
    parser.add_argument("--url-vllm", default=None, help="use this running vLLM server instead of starting one")
    parser.add_argument("--quick", action="store_true", help="hf only, concurrency 1 and 4, few tokens")
    parser.add_argument("--concurrency", default=None, help="comma-separated concurrencies (default 1,8,32,64)")
    parser.add_argument("--max-tokens", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=None, help="measured rounds of each path per concurrency")
    parser.add_argument("--waves", type=int, default=None, help="requests per measurement: waves * concurrency")
    parser.add_argument("--no-ignore-eos", action="store_true", help="let requests stop at EOS (counted)")
    parser.add_argument("--hf-args", default="", help="extra flags for the hf server, e.g. '--num-threads 1'")
    return parser.parse_args(argv)


def settings_from(args: argparse.Namespace) -> Settings:
    settings = QUICK if args.quick else FULL
    if args.concurrency:
        settings = replace(settings, concurrencies=tuple(int(c) for c in args.concurrency.split(",")))
    for name in ("max_tokens", "rounds", "waves"):
        if getattr(args, name) is not None:
            settings = replace(settings, **{name: getattr(args, name)})
    if args.no_ignore_eos:
        settings = replace(settings, ignore_eos=False)
    return settings


def _say(message: str) -> None:
    print(message, flush=True)


def main(argv: Sequence[str] | None = None, log: Log = _say) -> dict[str, Any]:
    """Runs the benchmark, prints the table and, last, the JSON line; returns the JSON figures."""
    args = parse_args(argv)
    settings = settings_from(args)
    backends = [b.strip() for b in (args.backends or ("hf" if args.quick else ",".join(BACKENDS))).split(",")]
    for b in backends:
        if b not in BACKENDS:
            raise SystemExit(f"unknown backend {b!r}; choose from {', '.join(BACKENDS)}")
    urls = {"hf": args.url_hf, "vllm": args.url_vllm}
    results: list[BackendResult] = []
    for backend in backends:
        with server(backend, urls[backend], settings, log, shlex.split(args.hf_args)) as url:
            results.append(asyncio.run(bench_backend(backend, url, settings, log)))
    figures = summary(results)
    print(table(results, settings))
    print(json.dumps(figures), flush=True)
    return figures


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")  # unwinds through the `finally` blocks that stop the servers


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _terminate)
    try:
        main()
    except KeyboardInterrupt:
        print("interrupted; every server started here was stopped", file=sys.stderr)
        sys.exit(130)
