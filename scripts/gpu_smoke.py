"""GPU smoke of the parts that run on CUDA, on a tiny random Llama (no weights travel to the GPU machine).

    python scripts/gpu_smoke.py --tokenizer DIR --out DIR

Checks, each reported PASS/FAIL with its error (a JSON summary lands in `--out/gpu_smoke.json`):
  1. the `hf` rollout server in bfloat16 on CUDA answers a chat call with logprobs;
  2. the policy engine on CUDA, nccl process group of world size 1: two steps, finite loss, weights change;
  3. `agentrl train recipe=quickstart` for 2 steps through the whole loop (server, rollouts, rewards, update,
     weight push), synchronous and `trainer.mode=fully_async` with partial rollouts; 2-step `gym` and `tool_use`
     runs with each per-turn estimator (`gigpo`, `turn_grpo`);
  4. `agentrl gateway`: an OpenAI-style call through the gateway, its session saved as a trajectory.

`--tokenizer` is a folder with the default model's tokenizer files (tokenizer.json, tokenizer_config.json and its
chat template), so the prompts are rendered as in a real run; the weights are random and tiny.

It runs from the repository root without installing agentrl (`PYTHONPATH=.`): beside torch and transformers it
imports pydantic, omegaconf, fastapi, uvicorn, aiohttp, httpx and gymnasium, but not Ray, Docker, litellm or
swebench. A gateway that does not stop within 30 s of SIGTERM fails its check, with its threads' stacks in
`gateway.log`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tiny_model(tokenizer_dir: Path, folder: Path) -> Path:
    """A random 2-layer Llama over the default model's tokenizer, saved as a model folder."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    for extra in tokenizer_dir.glob("*.jinja"):
        shutil.copy(extra, folder / extra.name)
    return folder


def wait_http(url: str, process: subprocess.Popen[bytes], timeout_s: float = 180.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the process serving {url} exited with {process.returncode} (see its log)")
        try:
            if httpx.get(url, timeout=2).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"{url} did not answer in {timeout_s} s")


def check_hf_server(model: Path, out: Path, device: str) -> dict[str, Any]:
    import httpx

    port = free_port()
    cmd = [sys.executable, "-m", "agentrl.rollout.servers.hf", "--model", str(model), "--port", str(port)]
    cmd += ["--dtype", "bfloat16", "--device", device]
    with open(out / "hf_server.log", "w") as log:
        server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
        try:
            wait_http(f"http://127.0.0.1:{port}/health", server)
            body = {
                "model": "policy",
                "messages": [{"role": "user", "content": "Say hello."}],
                "max_tokens": 12,
                "temperature": 1.0,
                "logprobs": True,
            }
            url = f"http://127.0.0.1:{port}/v1/chat/completions"
            # four requests for one prompt at once: the server prefills the prompt once and samples each apart
            with ThreadPoolExecutor(4) as pool:
                answers = list(pool.map(lambda _: httpx.post(url, json=body, timeout=120).json(), range(4)))
            replies = []
            for answer in answers:
                choice = answer["choices"][0]
                logprobs = [t["logprob"] for t in (choice.get("logprobs") or {}).get("content") or []]
                assert choice["message"]["content"] is not None, answer
                assert logprobs and all(lp <= 0.0 for lp in logprobs), f"logprobs: {logprobs}"
                replies.append(choice["message"]["content"])
            assert len(set(replies)) > 1, f"four samples of one prompt were all alike: {replies}"
            shared = shared_prefix_prefill(url)
            return {
                "completion_tokens": answers[0]["usage"]["completion_tokens"],
                "first_logprobs": logprobs[:3],
                "distinct_replies_of_4": len(set(replies)),
                "shared_prefix_first_logprob_diff": shared,
            }
        finally:
            server.terminate()
            server.wait(30)


def shared_prefix_prefill(url: str) -> float:
    """Three prompts with one system prompt, sent at once (the server runs the system prompt once) and alone:
    the largest difference of their greedy first token's logprob (the maximum, so a tie that flips the argmax in
    bf16 does not move it)."""
    import httpx

    system = "You walk on a frozen lake to the goal G. Falling into a hole ends the game. Reply with one move."

    def first_logprob(user: str) -> float:
        body = {
            "model": "policy",
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "max_tokens": 2,
            "temperature": 0.0,
            "logprobs": True,
        }
        answer = httpx.post(url, json=body, timeout=120).json()
        return answer["choices"][0]["logprobs"]["content"][0]["logprob"]

    users = ["LEFT: edge. DOWN: hole.", "RIGHT: ice, nearer G.", "UP: ice, farther from G. LEFT: hole."]
    alone = [first_logprob(u) for u in users]
    with ThreadPoolExecutor(3) as pool:
        together = list(pool.map(first_logprob, users))
    diff = max(abs(a - b) for a, b in zip(alone, together, strict=True))
    assert diff < 0.05, f"first-token logprobs alone {alone}, together {together}"
    return diff


def check_policy_engine(model: Path, device: str) -> dict[str, Any]:
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    sys.path.insert(0, str(REPO))
    from agentrl.trainer.rank import RankTrainer
    from tests.trainer_cases import batch_of_trajectories, run_config

    if device == "cuda":
        torch.cuda.set_device(0)
    backend = "nccl" if device == "cuda" else "gloo"
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    try:
        mesh = init_device_mesh(device, (1,))
        trainer = RankTrainer(run_config(), str(model), 0, 0, 1, mesh)
        before = {k: v.detach().float().cpu().clone() for k, v in trainer.state_dict().items()}
        steps = [trainer.step(batch_of_trajectories()) for _ in range(2)]
        after = trainer.state_dict()
        changed = sum(not torch.equal(before[k], v.detach().float().cpu()) for k, v in after.items())
        losses = [s.get("train/loss", s.get("train/pg_loss")) for s in steps]
        assert all(loss is not None and torch.isfinite(torch.tensor(loss)) for loss in losses), steps
        assert changed > 0, "no weight changed after two steps"
        device = str(next(trainer.engine.model.parameters()).device)
        return {"losses": losses, "tensors_changed": changed, "of": len(after), "parameters_on": device}
    finally:
        dist.destroy_process_group()


def check_shared_prefix(model: Path, device: str) -> dict[str, Any]:
    """`trainer.share_prompt_prefix` on the device: the same logprobs and gradients as full rows, in bf16."""
    import torch
    from transformers import AutoModelForCausalLM

    sys.path.insert(0, str(REPO))
    from agentrl.trainer.batch import collate
    from agentrl.trainer.forward import response_logprobs
    from tests.unit.test_shared_prefix import rows_of_different_lengths, rows_that_repeat_prompts

    policy = AutoModelForCausalLM.from_pretrained(model).to(device)
    result = {}
    # rows that share only a prefix, and rows that repeat whole prompts (each distinct prompt runs once)
    for name, rows in (("prefix", rows_of_different_lengths()), ("repeated_prompts", rows_that_repeat_prompts())):
        batch = collate(rows, 0)
        batch = type(batch)(**{k: v.to(device) if torch.is_tensor(v) else v for k, v in vars(batch).items()})
        grads = []
        for share in (False, True):
            policy.zero_grad()
            logp = response_logprobs(policy, batch, slice(0, len(rows)), torch.bfloat16, share_prefix=share)
            logp.sum().backward()
            grads.append((logp.detach(), torch.cat([p.grad.flatten() for p in policy.parameters()])))
        (full, g_full), (shared, g_shared) = grads
        logp_diff = float((full - shared).abs().max())
        grad_rel = float((g_full - g_shared).norm() / g_full.norm())
        assert logp_diff < 0.05 and grad_rel < 0.05, f"{name}: logprob diff {logp_diff}, gradient diff {grad_rel}"
        result[name] = {"max_logprob_diff": logp_diff, "grad_relative_diff": grad_rel}
    return result


def agentrl(args: list[str], log: Path, timeout_s: float = 420.0) -> set[str]:
    """Run the agentrl CLI; returns the `--dtype` of every hf server seen running under it (polled by `ps`)."""
    cmd = [sys.executable, "-c", "import sys; from agentrl.cli import main; sys.exit(main())", *args]
    dtypes: set[str] = set()
    with open(log, "w") as f:
        process = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=REPO)
        deadline = time.monotonic() + timeout_s
        while process.poll() is None and time.monotonic() < deadline:
            dtypes |= server_dtypes()
            time.sleep(1.0)
        if process.poll() is None:
            process.kill()
            raise TimeoutError(f"agentrl {args[0]} ran past {timeout_s} s")
    if process.returncode != 0:
        tail = log.read_text()[-3000:]
        raise RuntimeError(f"agentrl {args[0]} exited with {process.returncode}:\n{tail}")
    return dtypes


def server_dtypes() -> set[str]:
    """The `--dtype` argument of each running `agentrl.rollout.servers.hf` process."""
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    servers = [line for line in ps.splitlines() if "agentrl.rollout.servers.hf" in line]
    return {dtype for line in servers for dtype in re.findall(r"--dtype (\S+)", line)}


def two_steps(run: Path) -> dict[str, Any]:
    steps = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == [1, 2], steps
    assert any(s.get("train/grad_norm", 0.0) > 0 for s in steps), "no step made an update"
    keys = ("train/loss", "train/grad_norm", "rollout/failed", "train/rollout_logprob_abs_diff", "perf/weight_sync_s")
    keys += ("rollout/turns_mean",)
    return {f"step{s['step']}": {k: s.get(k) for k in keys} for s in steps}


def check_training(model: Path, out: Path, mode: str) -> dict[str, Any]:
    run = out / f"train_{mode}"
    shutil.rmtree(run, ignore_errors=True)
    args = ["train", "recipe=quickstart", f"model={model}", "trainer.steps=2", "data.eval_files=[]"]
    args += ["data.batch_size=2", "rollout.n=4", "rollout.max_tokens=16", f"output_dir={run}"]
    # random weights never echo the word: reward the reply's length instead, so each group has variance and
    # every step makes a real update and pushes changed weights
    args += ["reward.components=[{name: short, type: format, max_chars: 112}]"]
    if mode == "fully_async":
        args += ["trainer.mode=fully_async", "rollout.weight_update=resume"]
    dtypes = agentrl(args, out / f"train_{mode}.log")
    # on a GPU the server training starts runs in the trainer's dtype (rollout.dtype auto: bf16), not fp32
    assert dtypes == {"bfloat16"}, f"hf servers ran in {dtypes or 'nothing seen'}, expected bfloat16"
    return {**two_steps(run), "server_dtypes": sorted(dtypes)}


# random weights never name a move, call the calculator or name the product, so each recipe's own reward is the same
# for every reply: these reward what the replies differ in instead, so groups differ and each step updates
GYM_SETTINGS = ["rollout.n=8", "reward.components=[{name: has_e, type: format, pattern: '(?s).*e.*'}]"]
TOOL_USE_SETTINGS = [
    "rollout.n=4",
    "rollout.max_tokens=16",
    "reward.components=[{name: short, type: format, max_chars: 112}]",
]


def check_per_turn(model: Path, out: Path, recipe: str, estimator: str, settings: list[str]) -> dict[str, Any]:
    """A 2-step run of `recipe` with a per-turn estimator: each step updates through the loop's recorded turns."""
    run = out / f"{recipe}_{estimator}"
    shutil.rmtree(run, ignore_errors=True)
    args = ["train", f"recipe={recipe}", f"model={model}", "trainer.steps=2", f"trainer.advantage={estimator}"]
    args += ["trainer.eval_every=0", "data.batch_size=2", *settings, f"output_dir={run}"]
    agentrl(args, out / f"{recipe}_{estimator}.log")
    result = two_steps(run)
    assert all(step["rollout/turns_mean"] for step in result.values()), result
    return result


def check_gateway(model: Path, out: Path) -> dict[str, Any]:
    import httpx

    port = free_port()
    run = out / "gateway_run"
    cmd = [sys.executable, "-c", "import sys; from agentrl.cli import main; sys.exit(main())", "gateway"]
    cmd += ["recipe=quickstart", f"model={model}", f"gateway.port={port}", f"output_dir={run}"]
    # a gateway that does not stop on SIGTERM is sent SIGABRT, and faulthandler writes every thread's stack
    env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
    with open(out / "gateway.log", "w") as log:
        gateway = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env=env)
        try:
            wait_http(f"http://127.0.0.1:{port}/v1/models", gateway, timeout_s=240)
            body = {"model": "policy", "messages": [{"role": "user", "content": "Echo: kettle"}], "max_tokens": 8}
            answer = httpx.post(f"http://127.0.0.1:{port}/s/smoke/v1/chat/completions", json=body, timeout=120)
            answer.raise_for_status()
            closed = httpx.post(f"http://127.0.0.1:{port}/s/smoke/close", timeout=30).json()
            assert closed["calls"] == 1, closed
            result = {"reply": answer.json()["choices"][0]["message"]["content"], "closed": closed}
        finally:
            exit_s = stop_or_dump(gateway, out / "gateway_processes.txt")
    assert exit_s is not None, "the gateway did not exit within 30 s of SIGTERM (stacks in gateway.log)"
    return {**result, "exit_s": exit_s}


def stop_or_dump(process: subprocess.Popen[bytes], ps_file: Path, grace_s: float = 30.0) -> float | None:
    """SIGTERM, then the seconds it took to exit; None if it did not (its process tree is saved, then SIGABRT)."""
    started = time.monotonic()
    process.terminate()
    try:
        process.wait(grace_s)
        return round(time.monotonic() - started, 1)
    except subprocess.TimeoutExpired:
        ps = subprocess.run(["ps", "-eo", "pid,ppid,stat,etime,args"], capture_output=True, text=True)
        ps_file.write_text(ps.stdout)
        process.send_signal(6)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
        return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokenizer", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", nargs="*", default=None, help="run only these checks (by name)")
    parser.add_argument("--device", default="cuda", help="cuda (the smoke); cpu to try the script itself")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    model = tiny_model(args.tokenizer, args.out / "tiny-llama")
    checks: dict[str, Callable[[], dict[str, Any]]] = {
        "hf_server_bf16": lambda: check_hf_server(model, args.out, args.device),
        "policy_engine_world_1": lambda: check_policy_engine(model, args.device),
        "shared_prefix_bf16": lambda: check_shared_prefix(model, args.device),
        "train_sync_2_steps": lambda: check_training(model, args.out, "sync"),
        "train_fully_async_2_steps": lambda: check_training(model, args.out, "fully_async"),
        "gym_gigpo_2_steps": lambda: check_per_turn(model, args.out, "gym", "gigpo", GYM_SETTINGS),
        "gym_turn_grpo_2_steps": lambda: check_per_turn(model, args.out, "gym", "turn_grpo", GYM_SETTINGS),
        "tool_use_gigpo_2_steps": lambda: check_per_turn(model, args.out, "tool_use", "gigpo", TOOL_USE_SETTINGS),
        "tool_use_turn_grpo_2_steps": lambda: check_per_turn(
            model, args.out, "tool_use", "turn_grpo", TOOL_USE_SETTINGS
        ),
        "gateway_chat": lambda: check_gateway(model, args.out),
    }
    results: dict[str, Any] = {}
    for name, check in checks.items():
        if args.only and name not in args.only:
            continue
        started = time.monotonic()
        try:
            results[name] = {"ok": True, **check()}
        except Exception as exc:
            results[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()}
        results[name]["seconds"] = round(time.monotonic() - started, 1)
        print(f"{'PASS' if results[name]['ok'] else 'FAIL'} {name} ({results[name]['seconds']} s)", flush=True)
        if not results[name]["ok"]:
            print(results[name]["error"][-2000:], flush=True)
    (args.out / "gpu_smoke.json").write_text(json.dumps(results, indent=2, default=str))
    return 0 if all(r["ok"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
