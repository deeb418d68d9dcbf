"""Chat-completion calls through the gateway versus direct token calls to the same server, side by side.

Run from the repository root (about 2 minutes on 2 cores):

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/gateway.py [--max-tokens 4] [--calls-per-slot 3]

What is measured
----------------
One real `hf` server with the default model. The clients run in a separate process, so that this process holds
only what is measured:

* **direct**: the client process sends token-in/token-out `/v1/completions` calls to the server (agentrl's own
  `LLMClient`), the prompt rendered with the chat template beforehand;
* **gateway**: the client process sends the same conversation as `/v1/chat/completions` calls with the official
  `openai` SDK to a gateway in this process (one session per call), which renders, records and forwards them.

At concurrency 1, 8 and 32 (`--calls-per-slot` calls per concurrent client), each mode's calls per second and the
ratio gateway / direct; and the CPU milliseconds this process spends per call in the gateway mode (rendering,
recording, HTTP both ways: what the gateway adds per call). The last line printed is one JSON object. Target:
`gateway_over_direct_c32` >= 0.9.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Name three rivers in Europe and say one thing about each."},
]
LEVELS = (1, 8, 32)


def client_process(mode: str, url: str, prompt_ids: list[int], concurrency: int, calls: int, max_tokens: int) -> float:
    """Run in the client process: `calls` calls over `concurrency` concurrent clients; returns the wall seconds."""
    return asyncio.run(_clients(mode, url, prompt_ids, concurrency, calls, max_tokens))


async def _clients(mode: str, url: str, prompt_ids: list[int], concurrency: int, calls: int, max_tokens: int) -> float:
    import httpx
    import openai

    from agentrl.rollout import LLMClient
    from agentrl.rollout.protocol import SamplingParams

    sampling = SamplingParams(temperature=0.0, max_tokens=max_tokens)
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    async with LLMClient([url]) as llm, httpx.AsyncClient(timeout=600, limits=limits) as http:

        async def one(i: int) -> None:
            if mode == "direct":
                await llm.generate(prompt_ids, sampling)
            else:  # a session per call, over one connection pool (as one agent process would have)
                session = openai.AsyncOpenAI(base_url=f"{url}/s/c{i}/v1", api_key="x", max_retries=0, http_client=http)
                await session.chat.completions.create(
                    model="policy", messages=MESSAGES, max_tokens=max_tokens, temperature=0
                )

        async def slot(k: int) -> None:
            for j in range(calls // concurrency):
                await one(k * calls + j)

        started = time.perf_counter()
        await asyncio.gather(*(slot(k) for k in range(concurrency)))
        return time.perf_counter() - started


async def measure(
    server_url: str, tokenizer: Any, max_tokens: int, calls_per_slot: int, levels: tuple[int, ...] = LEVELS
) -> dict[str, Any]:
    from agentrl.gateway import Gateway
    from agentrl.loops.chat_template import encode, render
    from agentrl.rollout import LLMClient
    from agentrl.types import Message

    prompt_ids = encode(tokenizer, render(tokenizer, [Message(**m) for m in MESSAGES], add_generation_prompt=True))
    result: dict[str, Any] = {"max_tokens": max_tokens}
    loop = asyncio.get_running_loop()
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
        await loop.run_in_executor(pool, client_process, "direct", server_url, prompt_ids, 1, 1, max_tokens)  # warm
        async with LLMClient([server_url]) as llm, Gateway(llm, tokenizer, on_demand=True) as gateway:
            for c in levels:
                calls = c * calls_per_slot
                direct = await loop.run_in_executor(
                    pool, client_process, "direct", server_url, prompt_ids, c, calls, max_tokens
                )
                cpu = time.process_time()
                through = await loop.run_in_executor(
                    pool, client_process, "gateway", gateway.url, prompt_ids, c, calls, max_tokens
                )
                cpu_ms = 1000 * (time.process_time() - cpu) / calls
                for session in list(gateway.sessions.values()):
                    gateway.close_session(session)
                result[f"direct_calls_per_s_c{c}"] = round(calls / direct, 2)
                result[f"gateway_calls_per_s_c{c}"] = round(calls / through, 2)
                result[f"gateway_over_direct_c{c}"] = round(direct / through, 3)
                result[f"gateway_cpu_ms_per_call_c{c}"] = round(cpu_ms, 2)
                print(
                    f"concurrency {c:>2}: direct {calls / direct:6.2f}/s, gateway {calls / through:6.2f}/s "
                    f"({direct / through:.3f}x), gateway CPU {cpu_ms:.2f} ms/call",
                    flush=True,
                )
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-tokens", type=int, default=4)
    parser.add_argument("--calls-per-slot", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="concurrency 1 and 8, one call per client (a smoke)")
    args = parser.parse_args(argv)
    levels = (1, 8) if args.quick else LEVELS
    calls_per_slot = 1 if args.quick else args.calls_per_slot
    from agentrl.models import load_tokenizer, resolve_model
    from benchmarks.servers import hf_server

    model_path = resolve_model("default")
    with hf_server(model_path) as server:
        tokenizer = load_tokenizer(model_path)
        result = asyncio.run(measure(server.url, tokenizer, args.max_tokens, calls_per_slot, levels))
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
