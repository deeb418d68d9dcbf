"""Exact through a failover: a real 3-step training run checked token by token against the weights its recorded
version names (`tests/integration/exactness.py`), with the run's own exactness metrics: every trained token's version
known (from the server that generated it), the trainer's logprobs within 1e-3 of the rollout's, and the staleness
bound held. `hf`, `sync`, two replicas at temperature 1.3, one killed (SIGKILL) while it generates and restarted,
with workers: its requests are sent again to the live replica, every trajectory completes valid, the pushes route
around it, and it takes no worker's traffic before it serves the current weights. (Each backend and trainer mode
trains exactly in tests/integration/test_matrix_real.py.)
"""

from __future__ import annotations

import concurrent.futures
import time

import pytest

from agentrl.cli import main
from agentrl.loops.drift import check_drift
from agentrl.rollout.handles import HFServer
from agentrl.rollout.servers.hf.launch import launch_hf_server
from tests.integration.exactness import (
    assert_tokens_are_their_versions,
    keep_every_version,
    step_metrics,
    trained_trajectories,
)
from tests.integration.replicas import kill_once_busy, two_replicas

pytestmark = pytest.mark.integration

COMMON = [
    "train",
    "recipe=quickstart",
    "trainer.steps=2",
    "trainer.save_every=1",  # the checkpoint of step 1 holds version 1's weights, for the token-by-token check
    "trainer.lr=1e-4",  # versions far enough apart that a token with the wrong version would show
    "data.batch_size=2",
    "rollout.n=4",
    "rollout.max_tokens=24",
    "data.eval_files=[]",
    "rollout.workers=2",
    "rollout.num_cpus_per_worker=0.5",
    "trainer.skip_zero_advantage=false",  # every row trained, so each step measures the mismatch
]


@pytest.fixture(autouse=True)
def every_checkpoint(monkeypatch):
    """Keep the checkpoint of every step (but the last): each version's weights, for the token-by-token check."""
    keep_every_version(monkeypatch)


def assert_exact(run_dir, model_path: str, max_staleness: int) -> list[dict]:
    steps = step_metrics(run_dir)
    assert [m["step"] for m in steps] == list(range(1, len(steps) + 1)) and len(steps) >= 2
    for m in steps:
        assert m["rollout/version_known"] == 1.0
        assert m["rollout/staleness_max"] <= max_staleness
        assert m["train/rollout_logprob_abs_diff"] < 1e-3 or max_staleness > 0
        assert m.get("train/mismatch_lag/0", 0.0) < 1e-3  # tokens of the weights being trained: the same logprobs
    assert {t.metadata.get("worker") for t in trained_trajectories(run_dir)} == {"w0", "w1"}  # both workers ran
    counts = assert_tokens_are_their_versions(run_dir, model_path)
    print("generated tokens checked per version:", counts)
    return steps


def test_hf_sync_two_replicas_one_killed_and_restarted_with_workers(
    local_ray,
    default_model_path,
    default_tokenizer,
    tmp_path,
):
    survivor, victim = two_replicas(default_model_path)
    pool = concurrent.futures.ThreadPoolExecutor(1)
    restarted: list = []

    def kill_then_restart() -> int:
        busy = kill_once_busy(victim)
        time.sleep(2.0)  # the run goes on with one replica, then the other comes back on its first weights
        restarted.append(launch_hf_server(default_model_path, victim.port, max_model_len=1024))
        return busy

    killed = pool.submit(kill_then_restart)
    try:
        args = [
            *COMMON,
            "trainer.steps=3",  # the restarted replica serves the last steps
            "rollout.temperature=1.3",
            "rollout.max_tokens=48",
            "rollout.health_check_interval_s=0.5",
            f"rollout.urls=[{survivor.url},{victim.url}]",
        ]
        assert main([*args, f"output_dir={tmp_path}"]) == 0
        assert killed.result(timeout=300) > 0  # it died with requests in flight
        steps = assert_exact(tmp_path, default_model_path, max_staleness=0)
        retries = [m["rollout/server_retries"] + m["rollout/worker_server_retries"] for m in steps]
        print("requests sent again per step (driver + workers):", retries)
        assert sum(retries) >= 1  # the killed replica's requests were sent again (by the workers' clients)
        trajectories = trained_trajectories(tmp_path, include_failed=True)
        assert len(trajectories) == 8 * 3 and not [t for t in trajectories if t.failed or t.error]
        # the tokens are the conversation's: sampled text may tokenize differently from how the tokenizer would
        # encode it (benign, "tokenization"), but no turn's tokens differ from its messages
        assert all(check_drift(default_tokenizer, t).kind != "template" for t in trajectories)
        assert restarted and HFServer(restarted[0].url).served_version() == 3  # caught up, took the last push
    finally:
        for server in (survivor, victim, *restarted):
            server.stop()
