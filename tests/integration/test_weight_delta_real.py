"""Delta weight pushes in a real training run: a bf16 `hf` server trained for 3 steps gets the full weights once
and then deltas only (each under a quarter of the full bf16 weights), holds the trainer's weights cast to bf16
bit for bit afterwards (its digest against the last checkpoint's cast), and every generated token checks
against the weights its version names, recomputed in bf16."""

from __future__ import annotations

import pytest
import torch

from agentrl.cli import main
from agentrl.rollout.handles import HFServer
from agentrl.rollout.servers.hf.launch import launch_hf_server
from agentrl.weight_delta import cast_state, weights_digest
from tests.integration.exactness import assert_tokens_are_their_versions, checkpoint_model, step_metrics

pytestmark = pytest.mark.integration

STEPS = 3


def test_a_bf16_server_trained_with_delta_pushes_holds_the_trainers_cast_bit_for_bit(
    default_model_path, tmp_path, monkeypatch
):
    from transformers import AutoModelForCausalLM

    from agentrl.trainer import checkpoint_dir

    monkeypatch.setattr(checkpoint_dir, "KEEP_LAST", STEPS)  # every step's weights: the tokens' and the server's
    process = launch_hf_server(default_model_path, max_model_len=1024, dtype="bfloat16")
    run = tmp_path / "run"
    try:
        main(
            [
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
                f"rollout.urls=[{process.url}]",
                "trainer.skip_zero_advantage=false",
                f"output_dir={run}",
            ]
        )
        steps = step_metrics(run)
        server = HFServer(process.url, process=process)
        assert server.served_version() == STEPS and server.weights_dtype() == "bfloat16"
        base = AutoModelForCausalLM.from_pretrained(default_model_path, dtype=torch.float32)
        final = cast_state(checkpoint_model(base, run, STEPS).state_dict(), torch.bfloat16)
        assert server.weights_digest() == weights_digest(final), "the server's weights are not the trainer's cast"
        full_bf16 = sum(t.nbytes for t in final.values())
        pushed = [(m["perf/weight_sync_delta_servers"], m["perf/weight_sync_bytes"]) for m in steps]
        print("delta pushes (servers, bytes):", pushed, "full bf16:", full_bf16)
        assert [servers for servers, _ in pushed] == [1.0] * STEPS, "every step after the first push is a delta"
        assert all(0 < size < 0.25 * full_bf16 for _, size in pushed)
        counts = assert_tokens_are_their_versions(run, default_model_path, dtype=torch.bfloat16)
        print("generated tokens checked per version (bf16):", counts)
        assert len(counts) >= 2
    finally:
        process.stop()
