"""Weight sync of the default model (135M) to `hf` servers, full and delta, against a raw safetensors save + load.

Run from the repository root with the project's venv (a few minutes: it starts two `hf` servers here and two in
Docker containers):

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/weight_sync.py [--repeats 3] [--no-docker] [--vllm] [--ray]
    .venv/bin/python benchmarks/weight_sync.py --quick     # one round, the local servers only (a smoke)

What is measured
----------------
The trainer's fp32 weights, changed between pushes by a real AdamW step of the default model at `--lr` (3e-5,
the largest of the recipes'), pushed with `WeightSync.push` (what the trainer logs as `perf/weight_sync_s`; it
includes casting to the server's dtype and computing the delta) to:

* **fp32_shm / bf16_shm**: the built-in server on this machine in fp32 / bf16: a file in `/dev/shm`, by path;
* **fp32_http / bf16_http**: the built-in server in its own Docker container (its own `/dev/shm`: the "other
  host"), which gets the bytes over HTTP, with its weights token;
* **lora**: a LoRA adapter (rank 16 on the attention projections) on the fp32 local server: the adapter only;
* optionally **vllm** (`--vllm`: full pushes only, through its reload RPC) and **ray** (`--ray`: the built-in
  server in a Ray actor, through the object store).

Each round takes an optimizer step and pushes the full weights to every target (`push(full=True)`), then takes
another step and pushes a delta. Raw baseline, measured in the same rounds: `save_file` of the fp32 state dict
into `/dev/shm`, then `load_file` of it back into tensors of the same shapes (the physical cost of handing the
weights over through a file). Figures are medians over `--repeats` rounds after one unmeasured warm-up push.

The last line printed is one JSON object: `raw_s`; per target `<target>_{full,delta}_{s,bytes}` (bytes staged for
the push: the file or blob each route reads); `delta_bytes_over_full_bf16` (target ≤ 0.25),
`remote_delta_over_raw` (the bf16 HTTP delta push over the raw save + load, target ≤ 1) and
`remote_full_over_raw` beside it; `lora_s`, `lora_bytes`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack
from functools import partial
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `agentrl` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
from safetensors.torch import load_file, save_file

from benchmarks.servers import hf_server, hf_server_in_docker, hf_server_on_ray, vllm_server


def raw_s(state: dict[str, torch.Tensor]) -> float:
    """Seconds of a raw safetensors save into /dev/shm and a load back into tensors of the same shapes."""
    unique = {k: v.detach().clone() for k, v in state.items() if k != "lm_head.weight"}
    into = {k: torch.empty_like(v) for k, v in unique.items()}
    with tempfile.TemporaryDirectory(dir="/dev/shm") as tmp:
        started = time.perf_counter()
        save_file(unique, f"{tmp}/w.safetensors")
        with torch.no_grad():
            for name, tensor in load_file(f"{tmp}/w.safetensors").items():
                into[name].copy_(tensor)
        return time.perf_counter() - started


class Trainer:
    """The default model with AdamW: `step()` changes its weights as a training step at `lr` does."""

    def __init__(self, model_path: str, lr: float) -> None:
        from transformers import AutoModelForCausalLM

        self.model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=lr, weight_decay=0.0)
        self.batch = torch.randint(0, self.model.config.vocab_size, (1, 64), generator=torch.Generator().manual_seed(0))

    def step(self) -> dict[str, torch.Tensor]:
        self.model(input_ids=self.batch, labels=self.batch).loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad()
        return self.model.state_dict()


def lora_state(state: dict[str, torch.Tensor], rank: int = 16, seed: int = 0) -> dict[str, torch.Tensor]:
    """A LoRA adapter's tensors (A and B) on every attention projection of the model whose `state` this is."""
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for name, weight in state.items():
        if name.endswith(("q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight")):
            module = name.removesuffix(".weight")
            out[f"{module}.lora_A.weight"] = torch.randn(rank, weight.shape[1], generator=gen) * 0.01
            out[f"{module}.lora_B.weight"] = torch.randn(weight.shape[0], rank, generator=gen) * 0.01
    return out


def measure(trainer: Trainer, targets: dict[str, Any], repeats: int) -> dict[str, dict[str, list[float]]]:
    """Per target: seconds and bytes of full and delta pushes, per round; and the raw baseline (`raw`)."""
    from agentrl.rollout.handles import AdapterServer
    from agentrl.trainer.sync import WeightSync

    syncs = {name: WeightSync([server], delta="always") for name, server in targets.items()}
    adapter = AdapterServer(targets["fp32_shm"], "bench", 32.0) if "fp32_shm" in targets else None
    lora = WeightSync([adapter]) if adapter else None  # type: ignore[list-item]
    state = trainer.step()
    for sync in syncs.values():
        sync.push(state)
    if lora is not None:
        lora.push(lora_state(state))
    got: dict[str, dict[str, list[float]]] = {"raw": {"s": []}, "lora": {"s": [], "bytes": []}}
    for i in range(repeats):
        got["raw"]["s"].append(raw_s(state))
        for kind in ("full", "delta"):
            state = trainer.step()
            for name, sync in syncs.items():
                seconds = sync.push(state, full=kind == "full")
                entry = got.setdefault(f"{name}_{kind}", {"s": [], "bytes": []})
                entry["s"].append(seconds)
                entry["bytes"].append(sync.last.delta_bytes + sync.last.full_bytes)
        if lora is not None:
            got["lora"]["s"].append(lora.push(lora_state(state, seed=i + 1)))
            got["lora"]["bytes"].append(sum(t.nbytes for t in lora_state(state).values()))
        shown = ", ".join(f"{n} {v['s'][-1]:.2f} s" for n, v in got.items() if v["s"])
        print(f"  round {i + 1}: {shown}", flush=True)
    for sync in [*syncs.values(), *([lora] if lora else [])]:
        sync.close()
    return got


def summarize(got: dict[str, dict[str, list[float]]]) -> dict[str, Any]:
    result: dict[str, Any] = {"raw_s": round(statistics.median(got["raw"]["s"]), 3)}
    for name, values in got.items():
        if name == "raw":
            continue
        result[f"{name}_s"] = round(statistics.median(values["s"]), 3)
        if values.get("bytes"):
            result[f"{name}_bytes"] = int(statistics.median(values["bytes"]))

    def ratio(a: str, b: str, digits: int = 3) -> float | None:
        return round(result[a] / result[b], digits) if a in result and b in result and result[b] else None

    result["delta_bytes_over_full_bf16"] = ratio("bf16_shm_delta_bytes", "bf16_shm_full_bytes")
    result["fp32_delta_bytes_over_full"] = ratio("fp32_shm_delta_bytes", "fp32_shm_full_bytes")
    result["remote_delta_over_raw"] = ratio("bf16_http_delta_s", "raw_s", 2)
    result["remote_full_over_raw"] = ratio("bf16_http_full_s", "raw_s", 2)
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="default", help="model spec (default: SmolLM2-135M-Instruct)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--lr", type=float, default=3e-5, help="AdamW learning rate between pushes")
    parser.add_argument("--no-docker", action="store_true", help="leave the containerised (HTTP) servers out")
    parser.add_argument("--vllm", action="store_true", help="also vLLM (full pushes through its reload RPC)")
    parser.add_argument("--ray", action="store_true", help="also the hf server in a Ray actor (object store)")
    parser.add_argument("--quick", action="store_true", help="one round, the local servers only (a smoke)")
    args = parser.parse_args(argv)
    if args.quick:
        args.repeats, args.no_docker, args.vllm, args.ray = 1, True, False, False

    from agentrl.models import resolve_model

    model_path = resolve_model(args.model)
    starters: dict[str, Callable[[str], AbstractContextManager[Any]]] = {
        "fp32_shm": hf_server,
        "bf16_shm": partial(hf_server, dtype="bfloat16"),
    }
    if not args.no_docker:
        starters["fp32_http"] = hf_server_in_docker
        starters["bf16_http"] = partial(hf_server_in_docker, dtype="bfloat16")
    if args.vllm:
        starters["vllm"] = vllm_server
    if args.ray:
        starters["ray"] = hf_server_on_ray
    trainer = Trainer(model_path, args.lr)
    with ExitStack() as stack:
        targets = {name: stack.enter_context(start(model_path)) for name, start in starters.items()}
        result = summarize(measure(trainer, targets, args.repeats))
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
