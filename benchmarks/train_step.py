"""Trainer step throughput: agentrl's TrainBackend (1 rank) against a plain transformers step, and weight sync.

Run from the repository root with the project's venv:

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/train_step.py            # default model, 3-8 minutes
    .venv/bin/python benchmarks/train_step.py --quick                      # smaller batch, fewer repeats
    .venv/bin/python benchmarks/train_step.py --no-sync                    # no hf server, no weight sync
    .venv/bin/python benchmarks/train_step.py --no-sync --no-skip --batch 8 --prompt-len 134 --response-len 370 \
        --uneven --micro-batch-tokens 2048 --repeats 3                     # a FrozenLake-like multi-turn batch

What is measured
----------------
One batch of `--batch` synthetic scored trajectories (seeded random token ids: a `--prompt-len` prompt and a
`--response-len` generated response each, in groups of 4 with rewards 0/1, so GRPO advantages are non-zero),
trained two ways in the same process, on two copies of the same model (fp32 on CPU):

* **engine**: `make_backend(cfg, model, pad).step(trajectories)` with `trainer.num_ranks=1`: the whole
  policy step the loop runs (collate, GRPO advantages, micro-batches by token budget, the ppo_clip loss with its
  metrics, grad clipping, AdamW, LR scheduler, the mismatch metric);
* **plain**: a hand-written transformers step on the already collated batch: forward, log-softmax gather of
  the response tokens, `-(Â · log π · mask).sum() / tokens`, backward, `clip_grad_norm_`, `AdamW.step()`.

The two alternate (a b b a ...) for `--repeats` rounds each, after one unmeasured warm-up step of each, so
that drift of this shared machine hits both alike; the median of each is kept. Tokens are the batch's real
(unpadded) tokens, prompt included: both paths run the forward and backward over all of them.

With `--uneven` (rows of different lengths, as a multi-turn batch's are) the plain step pays for padding every
row to the longest and for the prompt's logits, which the engine skips (micro-batches of rows sorted by length run
only their own columns, and the LM head runs only on response positions).

Weight sync: an `hf` rollout server is started on the same model (`launch_hf_server`, as
`rollout_throughput.py` does); each round takes `backend.state_dict()` (the CPU snapshot the loop pushes) and
times `WeightSync.push` of it (safetensors in /dev/shm, `POST /v1/weights`, the server loads it in place): the
figure the loop logs as `perf/weight_sync_s`. Median of `--sync-repeats`, after one unmeasured push. The
server is stopped on exit, also on errors and Ctrl-C.

The figures (the last line printed is one JSON object)
-----------------------------------------------------
* `train_tok_s`: engine tokens/s (median step);
* `engine_over_plain`: engine tokens/s over plain tokens/s (target >= 0.8);
* `weight_sync_s`: median seconds of `WeightSync.push` to the hf server (target < 2 for the 135M model);
  null with `--no-sync`;
* `state_dict_s`: median seconds of `backend.state_dict()` (the snapshot before the push);
* `skip_zero_advantage_speedup`: step time with `trainer.skip_zero_advantage=false` over step time with it on,
  on a batch where half the groups have equal rewards (advantage 0: the update is the same, see
  tests/unit/test_zero_advantage_skip.py); two backends alternating as above; null with `--no-skip`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `agentrl` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from agentrl.config.schema import AgentRLConfig
from agentrl.trainer.algorithms import compute_advantages, rewards_and_groups
from agentrl.trainer.batch import PaddedBatch, collate
from agentrl.types import Segment, Trajectory

GROUP = 4


def trajectories(
    batch: int,
    prompt_len: int,
    response_len: int,
    vocab: int,
    seed: int = 0,
    flat_groups: bool = False,
    uneven: bool = False,
) -> list[Trajectory]:
    """Seeded synthetic scored trajectories, `GROUP` per prompt, rewards alternating 1/0 within a group (with
    `flat_groups`, every other group is all 1: no signal; with `uneven`, response lengths spread evenly from
    `response_len` / 8 to `response_len`, as a multi-turn batch's are)."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for i in range(batch):
        length = response_len
        if uneven:
            length = max(1, round(response_len / 8 + (response_len - response_len / 8) * i / max(batch - 1, 1)))
        prompt = torch.randint(10, vocab, (prompt_len,), generator=gen).tolist()
        response = torch.randint(10, vocab, (length,), generator=gen).tolist()
        segments = [
            Segment(token_ids=prompt, trainable=False),
            Segment(token_ids=response, trainable=True, logprobs=[-1.0] * len(response)),
        ]
        flat = flat_groups and (i // GROUP) % 2 == 1
        out.append(Trajectory(segments=segments, group_id=f"g{i // GROUP}", reward=1.0 if flat else float(i % 2)))
    return out


class PlainStep:
    """A plain transformers policy-gradient step: forward, masked logprob loss, backward, clip, AdamW."""

    def __init__(self, model: torch.nn.Module, lr: float, grad_clip: float):
        self.model = model
        self.grad_clip = grad_clip
        self.optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)

    def __call__(self, batch: PaddedBatch, advantages: torch.Tensor) -> None:
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        logits = self.model(
            input_ids=batch.input_ids,
            attention_mask=batch.attention_mask,
            position_ids=batch.position_ids,
            use_cache=False,
        ).logits
        p = batch.prompt_len
        logp = torch.log_softmax(logits[:, p - 1 : -1].float(), -1)
        logp = logp.gather(-1, batch.input_ids[:, p:, None]).squeeze(-1)
        mask = batch.response_mask.float()
        loss = -(logp * advantages[:, None] * mask).sum() / mask.sum()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)
        self.optimizer.step()


def timed(fn: Callable[[], Any]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def alternate(
    a: Callable[[], Any], b: Callable[[], Any], repeats: int, names: tuple[str, str] = ("engine", "plain")
) -> tuple[list[float], list[float]]:
    """Times of `a` and `b`, run a b b a a b ... after one warm-up call each."""
    a(), b()
    times_a: list[float] = []
    times_b: list[float] = []
    for i in range(repeats):
        first, second = (a, b) if i % 2 == 0 else (b, a)
        t1, t2 = timed(first), timed(second)
        (times_a if first is a else times_b).append(t1)
        (times_b if first is a else times_a).append(t2)
        print(f"  round {i + 1}: {names[0]} {times_a[-1]:.2f} s, {names[1]} {times_b[-1]:.2f} s", flush=True)
    return times_a, times_b


def weight_sync_times(backend: Any, model_path: str, repeats: int) -> list[tuple[float, float]]:
    """(state_dict seconds, push seconds) per round, pushing to a freshly started hf server."""
    from agentrl.trainer.sync import WeightSync
    from benchmarks.servers import hf_server

    with hf_server(model_path) as server:
        sync = WeightSync([server])
        sync.push(backend.state_dict())  # warm-up: the server's first load pays one-time costs
        rounds = []
        for i in range(repeats):
            t0 = time.perf_counter()
            state = backend.state_dict()
            t1 = time.perf_counter()
            push_s = sync.push(state)
            rounds.append((t1 - t0, push_s))
            print(f"  sync {i + 1}: state_dict {t1 - t0:.2f} s + push {push_s:.2f} s", flush=True)
        return rounds


def compare(
    backend: Any, plain_model: torch.nn.Module, cfg: AgentRLConfig, trajs: list[Trajectory], pad: int, repeats: int
) -> tuple[int, float, float]:
    """(tokens, median engine step s, median plain step s), the two paths alternating on the same batch."""
    plain = PlainStep(plain_model, lr=cfg.trainer.lr, grad_clip=cfg.trainer.grad_clip)
    batch = collate(trajs, pad)
    rewards, groups = rewards_and_groups(trajs)
    advantages = compute_advantages(cfg.trainer.advantage, rewards, groups)
    tokens = int(batch.attention_mask.sum())
    print(f"{torch.get_num_threads()} threads; {len(trajs)} trajectories, {tokens} tokens; {repeats} rounds each")
    engine_s, plain_s = alternate(lambda: backend.step(trajs), lambda: plain(batch, advantages), repeats)
    engine_med, plain_med = statistics.median(engine_s), statistics.median(plain_s)
    print(f"engine {tokens / engine_med:.1f} tok/s (median {engine_med:.2f} s), plain {tokens / plain_med:.1f} tok/s")
    return tokens, engine_med, plain_med


def skip_speedup(model_path: str, pad: int, trajs: list[Trajectory], repeats: int) -> float:
    """Median step time without the zero-advantage skip over the median with it, alternating."""
    from agentrl.trainer.backend import make_backend

    def backend(skip: bool) -> Any:
        cfg = {"trainer": {"lr": 1e-6, "num_ranks": 1, "skip_zero_advantage": skip}}
        return make_backend(AgentRLConfig.model_validate(cfg), model_path, pad)

    skipping, full = backend(True), backend(False)
    try:
        skip_s, full_s = alternate(
            lambda: skipping.step(trajs), lambda: full.step(trajs), repeats, names=("skip", "no skip")
        )
    finally:
        skipping.close()
        full.close()
    ratio = statistics.median(full_s) / statistics.median(skip_s)
    print(f"zero-advantage skip: {ratio:.2f}x on a batch whose groups are half without signal", flush=True)
    return ratio


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="default", help="model spec (default: SmolLM2-135M-Instruct)")
    parser.add_argument("--batch", type=int, default=8, help="trajectories per step")
    parser.add_argument("--prompt-len", type=int, default=48, help="prompt tokens per trajectory")
    parser.add_argument("--response-len", type=int, default=48, help="generated tokens per trajectory")
    parser.add_argument("--repeats", type=int, default=5, help="measured steps of each path")
    parser.add_argument("--sync-repeats", type=int, default=3)
    parser.add_argument("--no-sync", action="store_true", help="skip the weight sync (no hf server)")
    parser.add_argument("--no-skip", action="store_true", help="do not measure the zero-advantage skip")
    parser.add_argument("--quick", action="store_true", help="batch 4, 32+32 tokens, 1 repeat (a smoke)")
    parser.add_argument("--micro-batch-tokens", type=int, default=None, help="trainer.micro_batch_tokens")
    parser.add_argument(
        "--uneven", action="store_true", help="response lengths from 1/8 of --response-len to all of it (multi-turn)"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.batch, args.prompt_len, args.response_len, args.repeats, args.sync_repeats = 4, 32, 32, 1, 1

    from agentrl.models import load_model, load_tokenizer, resolve_model
    from agentrl.trainer.backend import make_backend

    model_path = resolve_model(args.model)
    tokenizer = load_tokenizer(model_path)
    pad = tokenizer.pad_token_id or 0
    trainer: dict[str, Any] = {"lr": 1e-6, "num_ranks": 1}
    if args.micro_batch_tokens:
        trainer["micro_batch_tokens"] = args.micro_batch_tokens
    cfg = AgentRLConfig.model_validate({"trainer": trainer})
    backend = make_backend(cfg, model_path, pad)
    trajs = trajectories(args.batch, args.prompt_len, args.response_len, len(tokenizer), uneven=args.uneven)
    tokens, engine_med, plain_med = compare(backend, load_model(model_path), cfg, trajs, pad, args.repeats)

    sync_s = state_s = None
    if not args.no_sync:
        rounds = weight_sync_times(backend, model_path, args.sync_repeats)
        state_s = statistics.median(a for a, _ in rounds)
        sync_s = statistics.median(b for _, b in rounds)
    backend.close()
    speedup = None
    if not args.no_skip:
        flat = trajectories(args.batch * 2, args.prompt_len, args.response_len, len(tokenizer), flat_groups=True)
        speedup = skip_speedup(model_path, pad, flat, args.repeats)
    result = {
        "train_tok_s": round(tokens / engine_med, 2),
        "engine_over_plain": round(plain_med / engine_med, 3),
        "weight_sync_s": None if sync_s is None else round(sync_s, 3),
        "state_dict_s": None if state_s is None else round(state_s, 3),
        "skip_zero_advantage_speedup": None if speedup is None else round(speedup, 3),
    }
    print(json.dumps(result), flush=True)
    return result


if __name__ == "__main__":
    main()
