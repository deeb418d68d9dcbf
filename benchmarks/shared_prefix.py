"""Training-step time with the rows' shared prompt prefix run once (`trainer.share_prompt_prefix`) against the
same step over full rows, side by side in one process.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/shared_prefix.py          # default model, ~3 min on 2 cores
    .venv/bin/python benchmarks/shared_prefix.py --quick                  # a tiny random model, seconds

The batch is shaped like a `gym` step's (one row per turn, `env.history_turns=0`): `--rows` rows, each a
`--prefix` token system prompt every row shares, a `--state` token state of its own (lengths spread ±3 tokens, so
prompts are left-padded differently) and a `--reply` token reply; groups of 4 with rewards 0/1. With `--states N`
the rows' states are drawn from N (a gym step's turns revisit the few states of a small map), and the shared engine
also runs each repeated prompt once. Two policy engines
on copies of the same model (fp32, CPU) take one `policy_step` each per round, alternating (a b b a ...) for
`--repeats` rounds after one unmeasured step each; the median of each is kept. The defaults are the measured
`gym` recipe's: 68 shared of ~112 prompt tokens, 3-token replies, 40 turns a step.

With `--trajectories RUN/trajectories/step_0005.jsonl.gz` the batch is a real step's instead (its first `--limit`
rows, e.g. a `swe_explore` step: a group's 8 samples repeat a ~1,270-token prompt), and `--gradient-checkpointing`
runs both engines with it.

Printed last, one JSON object: `full_s` and `shared_s` (median step seconds) and `shared_speedup` (full over
shared). Both engines make the same update (tests/unit/test_shared_prefix.py).
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `agentrl` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from agentrl.config.schema import TrainerConfig
from agentrl.trainer.engine import EngineConfig, PolicyEngine
from agentrl.trainer.step import policy_step
from agentrl.types import Segment, Trajectory


def gym_like_rows(rows: int, prefix: int, state: int, reply: int, vocab: int, states: int = 0) -> list[Trajectory]:
    """Seeded rows: a shared prefix, a state (length state-3 .. state+3) and a reply. `states` > 0: each row's
    state one of that many, drawn at random (turns from the states an episode visits); 0: every row its own."""
    gen = torch.Generator().manual_seed(0)
    system = torch.randint(10, vocab, (prefix,), generator=gen).tolist()
    pool = [torch.randint(10, vocab, (state - 3 + i % 7,), generator=gen).tolist() for i in range(states)]
    out = []
    for i in range(rows):
        if pool:
            own = pool[int(torch.randint(len(pool), (1,), generator=gen))]
        else:
            own = torch.randint(10, vocab, (state - 3 + i % 7,), generator=gen).tolist()
        answer = torch.randint(10, vocab, (reply,), generator=gen).tolist()
        segments = [
            Segment(token_ids=system + own, trainable=False),
            Segment(token_ids=answer, trainable=True, logprobs=[-1.0] * reply),
        ]
        out.append(Trajectory(segments=segments, group_id=f"g{i // 4}", reward=float(i % 2)))
    return out


def saved_rows(path: Path, limit: int) -> list[Trajectory]:
    """The first `limit` trajectories a run saved (`RUN/trajectories/step_*.jsonl.gz`)."""
    import gzip

    with gzip.open(path, "rt") as f:
        return [Trajectory.from_json(line) for line, _ in zip(f, range(limit), strict=False)]


def load(quick: bool) -> torch.nn.Module:
    if quick:
        from tests.tiny_models import tiny_llama

        return tiny_llama()
    from agentrl.models import load_model

    return load_model("default", device="cpu")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=40)
    parser.add_argument("--prefix", type=int, default=68)
    parser.add_argument("--state", type=int, default=44)
    parser.add_argument("--reply", type=int, default=3)
    parser.add_argument("--states", type=int, default=0, help="rows repeat this many states (0: none repeats)")
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--micro-batch-tokens", type=int, default=2048)
    parser.add_argument("--trajectories", type=Path, help="a run's step_*.jsonl.gz: train on its rows instead")
    parser.add_argument("--limit", type=int, default=16, help="with --trajectories: its first rows")
    parser.add_argument("--gradient-checkpointing", action="store_true")
    parser.add_argument("--quick", action="store_true", help="a tiny random model and 2 rounds")
    args = parser.parse_args()
    repeats = 2 if args.quick else args.repeats
    base = load(args.quick)
    vocab = base.config.vocab_size
    if args.trajectories is not None:
        trajectories = saved_rows(args.trajectories, args.limit)
    else:
        trajectories = gym_like_rows(args.rows, args.prefix, args.state, args.reply, vocab, args.states)
    engines = {}
    for name, share in (("full", False), ("shared", True)):
        model = base if name == "shared" else copy.deepcopy(base)
        config = EngineConfig(
            lr=1e-6,
            micro_batch_tokens=args.micro_batch_tokens,
            share_prompt_prefix=share,
            gradient_checkpointing=args.gradient_checkpointing,
        )
        engines[name] = PolicyEngine(model, config)
    cfg = TrainerConfig(skip_zero_advantage=False)
    times: dict[str, list[float]] = {"full": [], "shared": []}
    for name in engines:  # warm-up, unmeasured
        policy_step(engines[name], cfg, trajectories, 0)
    for i in range(repeats):
        for name in ("full", "shared") if i % 2 == 0 else ("shared", "full"):
            started = time.perf_counter()
            policy_step(engines[name], cfg, trajectories, 0)
            times[name].append(time.perf_counter() - started)
        print(f"round {i + 1}: full {times['full'][-1]:.2f} s, shared {times['shared'][-1]:.2f} s", flush=True)
    full, shared = statistics.median(times["full"]), statistics.median(times["shared"])
    print(
        json.dumps({"full_s": round(full, 3), "shared_s": round(shared, 3), "shared_speedup": round(full / shared, 2)})
    )


if __name__ == "__main__":
    main()
