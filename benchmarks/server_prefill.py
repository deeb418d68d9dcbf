"""The `hf` server's generation time for one wave of gym-like turns with the prompts' shared prefix (a system
prompt) prefilled once, against the same wave with every prompt prefilled whole, side by side in one process.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/server_prefill.py          # default model, ~1 min on 2 cores
    .venv/bin/python benchmarks/server_prefill.py --quick                  # a tiny random model, seconds

A wave is what a `gym` step sends at once: `--requests` requests over `--states` distinct prompts (each state's
turns repeat its prompt, which the server already runs once), every prompt a `--prefix` token system prompt and
a state of its own (`--state` ±3 tokens, so prompts are left-padded differently), each answered with
`--reply` tokens. One started `HFEngine` serves both variants, alternating (a b b a ...) for `--repeats` rounds
after one unmeasured wave each; the baseline turns the sharing off by raising its threshold. The median of each
is kept.

Printed last, one JSON object: `whole_s` and `shared_s` (median seconds a wave) and `shared_speedup` (whole over
shared). Both give the same tokens and logprobs (tests/unit/test_hf_engine.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `agentrl` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from agentrl.rollout.protocol import SamplingParams
from agentrl.rollout.servers.hf import core
from agentrl.rollout.servers.hf.engine import EngineConfig, HFEngine
from agentrl.shared_prefix import MIN_SHARED_TOKENS


def gym_like_prompts(requests: int, states: int, prefix: int, state: int, vocab: int) -> list[list[int]]:
    """Seeded prompts: a shared prefix and one of `states` states (lengths state-3 .. state+3)."""
    gen = torch.Generator().manual_seed(0)
    system = torch.randint(10, vocab, (prefix,), generator=gen).tolist()
    pool = [system + torch.randint(10, vocab, (state - 3 + i % 7,), generator=gen).tolist() for i in range(states)]
    return [pool[i % states] for i in range(requests)]


def make_engine(quick: bool) -> HFEngine:
    if quick:
        from transformers import LlamaConfig, LlamaForCausalLM

        torch.manual_seed(0)
        config = LlamaConfig(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)  # fmt: skip
        engine = HFEngine(LlamaForCausalLM(config).eval(), None, EngineConfig(max_batch_size=64))
        engine.start()
    else:
        from agentrl.models import resolve_model

        engine = HFEngine.from_pretrained(resolve_model("default"), config=EngineConfig(max_batch_size=64))
    engine.core.eos_ids = frozenset()  # every request runs its `--reply` tokens
    return engine


async def wave(engine: HFEngine, prompts: list[list[int]], reply: int, share: bool) -> float:
    core.MIN_SHARED_TOKENS = MIN_SHARED_TOKENS if share else 10**9
    params = SamplingParams(temperature=1.0, max_tokens=reply)
    started = time.perf_counter()
    await asyncio.gather(*(engine.generate(p, params) for p in prompts))
    return time.perf_counter() - started


async def run(args: argparse.Namespace) -> dict[str, float]:
    engine = make_engine(args.quick)
    vocab = engine.model.config.vocab_size
    prompts = gym_like_prompts(args.requests, args.states, args.prefix, args.state, vocab)
    times: dict[bool, list[float]] = {False: [], True: []}
    try:
        for share in (False, True):
            await wave(engine, prompts, args.reply, share)  # unmeasured
        for r in range(args.repeats):
            for share in (False, True) if r % 2 == 0 else (True, False):
                times[share].append(await wave(engine, prompts, args.reply, share))
    finally:
        engine.shutdown()
        core.MIN_SHARED_TOKENS = MIN_SHARED_TOKENS
    whole, shared = statistics.median(times[False]), statistics.median(times[True])
    return {"whole_s": round(whole, 3), "shared_s": round(shared, 3), "shared_speedup": round(whole / shared, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a tiny random model instead of the default one")
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--states", type=int, default=11)
    parser.add_argument("--prefix", type=int, default=68)
    parser.add_argument("--state", type=int, default=44)
    parser.add_argument("--reply", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=6)
    args = parser.parse_args()
    result = asyncio.run(run(args))
    print(f"whole prompts {result['whole_s']} s · shared prefix once {result['shared_s']} s a wave")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
