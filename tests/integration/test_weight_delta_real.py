"""Delta weight pushes in a real training run, through a trainer killed mid-push and resumed.

A bf16 `hf` server that holds every push for a moment (`AGENTRL_FAULT_WEIGHTS_DELAY_S`) serves a 3-step run; the
trainer (its own process) is killed (SIGKILL) while the server holds step 2's push, and the run is resumed from
its step-1 checkpoint. The resumed trainer pushes the full weights first (the server may hold the killed run's
step 2), then deltas only, each under a quarter of the full bf16 weights; at the end the server holds the trainer's
weights cast to bf16 bit for bit (its digest against the last checkpoint's cast), and every trained token checks
against the weights its version names, recomputed in bf16."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import torch

from agentrl.cli import main
from agentrl.rollout.handles import HFServer
from agentrl.rollout.servers.hf.app import FAULT_WEIGHTS_DELAY_ENV
from agentrl.rollout.servers.hf.launch import launch_hf_server
from agentrl.weight_delta import cast_state, weights_digest
from tests.integration.exactness import assert_tokens_are_their_versions, checkpoint_model

pytestmark = pytest.mark.integration

STEPS = 3
HOLD_S = 1.5


def run_args(url: str, run: Path) -> list[str]:
    return [
        "train",
        "recipe=quickstart",
        f"trainer.steps={STEPS}",
        "trainer.save_every=1",
        "trainer.lr=1e-4",  # versions far enough apart that a token with the wrong version would show
        "data.batch_size=2",
        "rollout.n=4",
        "rollout.max_tokens=24",
        "data.eval_files=[]",
        "rollout.backend=hf",
        f"rollout.urls=[{url}]",
        "rollout.weight_delta=always",  # deltas through shared memory too (auto sends this server the full cast)
        "trainer.skip_zero_advantage=false",
        f"output_dir={run}",
    ]


def kill_during_step_2_push(trainer: subprocess.Popen, url: str, run: Path, timeout: float = 600.0) -> None:
    """SIGKILL the trainer once step 1 is checkpointed and the server holds the next push."""
    deadline = time.monotonic() + timeout
    while (
        not (run / "checkpoints" / "step_000001").exists() or not httpx.get(f"{url}/health").json()["weights_pending"]
    ):
        assert trainer.poll() is None, "the trainer ended before step 2's push"
        assert time.monotonic() < deadline, "step 2's push never came"
        time.sleep(0.05)
    os.killpg(trainer.pid, signal.SIGKILL)
    trainer.wait()


def test_a_bf16_server_trained_with_deltas_through_a_killed_and_resumed_trainer_holds_its_cast_bit_for_bit(
    default_model_path, tmp_path, monkeypatch
):
    from transformers import AutoModelForCausalLM

    from agentrl.trainer import checkpoint_dir

    monkeypatch.setattr(checkpoint_dir, "KEEP_LAST", STEPS)  # every step's weights: the tokens' and the server's
    process = launch_hf_server(
        default_model_path, max_model_len=1024, dtype="bfloat16", env={FAULT_WEIGHTS_DELAY_ENV: str(HOLD_S)}
    )
    run = tmp_path / "run"
    agentrl = [sys.executable, "-c", "from agentrl.cli import main; raise SystemExit(main())"]
    try:
        with (tmp_path / "killed.log").open("wb") as log:
            trainer = subprocess.Popen(
                [*agentrl, *run_args(process.url, run)], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
            kill_during_step_2_push(trainer, process.url, run)
        server = HFServer(process.url, process=process)
        killed_at = server.served_version()
        resumed = time.monotonic()
        main([*run_args(process.url, run), "trainer.resume=true"])
        print(
            f"FAULT trainer killed mid-push: the server held version {killed_at}; resumed from step 1 and caught "
            f"up with a full push, the run done {time.monotonic() - resumed:.0f} s later"
        )
        assert server.served_version() == STEPS and server.weights_dtype() == "bfloat16"
        base = AutoModelForCausalLM.from_pretrained(default_model_path, dtype=torch.float32)
        final = cast_state(checkpoint_model(base, run, STEPS).state_dict(), torch.bfloat16)
        assert server.weights_digest() == weights_digest(final), "the server's weights are not the trainer's cast"
        full_bf16 = sum(t.nbytes for t in final.values())
        lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        resumed_steps = [m for m in lines if "perf/weight_sync_bytes" in m and m["step"] > 1]
        pushed = [(m["perf/weight_sync_delta_servers"], m["perf/weight_sync_bytes"]) for m in resumed_steps]
        print("pushes after the resume (delta servers, bytes):", pushed, "full bf16:", full_bf16)
        assert [servers for servers, _ in pushed] == [1.0] * (STEPS - 1), "after the resume's full push, deltas"
        assert all(0 < size < 0.25 * full_bf16 for _, size in pushed)
        counts = assert_tokens_are_their_versions(run, default_model_path, dtype=torch.bfloat16)
        print("generated tokens checked per version (bf16):", counts)
        assert len(counts) >= 2
    finally:
        process.stop()
