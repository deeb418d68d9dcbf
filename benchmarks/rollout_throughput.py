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
import shlex
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType
from typing import Any

if __package__ in (None, ""):  # run as a script: make `agentrl` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.throughput_paths import FULL, QUICK, Paths, Point, Settings, make_client, make_raw_session, round_order

BACKENDS = ("hf", "vllm")
REQUIRED_KEYS = ("hf_tok_s_c32", "vllm_tok_s_c32", "client_over_raw_vllm_c32", "hf_scaling_c32_over_c1")
Log = Callable[[str], None]


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
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose from {', '.join(BACKENDS)}")
    from agentrl.models import resolve_model
    from benchmarks.servers import hf_server, vllm_server

    model, length = resolve_model("default"), settings.max_model_len
    started = hf_server(model, length, hf_args, log) if backend == "hf" else vllm_server(model, length, log)
    with started as handle:
        yield handle.url


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
