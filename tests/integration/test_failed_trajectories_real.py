"""Infrastructure failures in a real training step: the real model and `hf` server behind a fault-injecting proxy
that breaks some trajectories' requests. Those trajectories are saved and counted but not trained on; the others
are trained; past `trainer.max_failed_fraction` the run stops with a clear message instead of training."""

from __future__ import annotations

import gzip
import json

import pytest

from agentrl.cli import main
from agentrl.loops.manager import trajectory_seed
from agentrl.types import StopReason, Trajectory
from tests.integration.faults import fault_injecting_proxy

pytestmark = pytest.mark.integration

ROLLOUT_SEED = 11
# (batch position, sample index) of the trajectories whose requests fail: 3 of 8, two of them in one group
BROKEN = {(0, 0), (1, 1), (1, 2)}


def failing_seeds(step: int = 1) -> set[int]:
    step_seed = ROLLOUT_SEED + 7919 * step  # the seed BatchCollector gives the step (round 0)
    return {trajectory_seed(step_seed, pos, k) for pos, k in BROKEN}  # a single-turn trajectory: turn 0's seed


def train(url, out, *overrides, expect: int) -> None:
    args = [
        "train",
        "recipe=quickstart",
        f"rollout.urls=[{url}]",
        "data.batch_size=2",
        "rollout.n=4",
        "rollout.max_tokens=12",
        f"rollout.seed={ROLLOUT_SEED}",
        "data.eval_files=[]",
        "trainer.steps=1",
        "trainer.skip_zero_advantage=false",  # every kept row is trained, so rows_trained counts them
        f"output_dir={out}",
        *overrides,
    ]
    assert main(args) == expect


def saved(out, step: int = 1) -> list[Trajectory]:
    with gzip.open(out / "trajectories" / f"step_{step:04d}.jsonl.gz", "rt") as f:
        return [Trajectory.from_json(line) for line in f]


def test_failed_trajectories_are_saved_and_counted_but_not_trained(hf_server_url, tmp_path):
    with fault_injecting_proxy(hf_server_url, failing_seeds()) as proxy:
        train(proxy.url, tmp_path, "trainer.max_failed_fraction=0.5", expect=0)
    assert proxy.failed >= len(BROKEN)  # each broken request was refused (and retried)
    trajectories = saved(tmp_path)
    failed = [t for t in trajectories if t.failed]
    assert len(trajectories) == 8 and len(failed) == 3
    assert {(t.metadata["sample_position"], t.sample_index) for t in failed} == BROKEN
    assert all(t.stop_reason is StopReason.SERVER_ERROR and "injected fault" in (t.error or "") for t in failed)
    assert all(t.reward is None and not t.reward_components for t in failed)  # never graded
    assert all(t.reward is not None and t.num_generated_tokens > 0 for t in trajectories if not t.failed)
    (metrics,) = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert metrics["rollout/failed"] == 3.0 and metrics["rollout/failed/server_error"] == 3.0
    assert metrics["train/rows_trained"] == 5.0  # the 5 that got through, and only those


def test_a_step_past_the_failure_limit_stops_the_run_and_saves_its_state(hf_server_url, tmp_path, capsys):
    # step 1 is sound; step 2 loses 3 of 8 trajectories, more than the limit of 25 %
    with fault_injecting_proxy(hf_server_url, failing_seeds(step=2)) as proxy:
        train(proxy.url, tmp_path, "trainer.steps=2", "trainer.max_failed_fraction=0.25", expect=1)
    out, err = capsys.readouterr()
    assert "step 2: 3 of 8 trajectories failed for infrastructure reasons (server_error: 3)" in err
    assert "more than trainer.max_failed_fraction=0.25; not training on them" in err
    assert "injected fault: engine crashed" in err  # the first error, to start from
    assert "Traceback" in err  # an infrastructure failure keeps its traceback
    assert len(saved(tmp_path, step=2)) == 8  # the failed step's trajectories are kept for a look
    steps = [json.loads(line)["step"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1]  # step 2 was not trained
    # the run's state at the last finished step is saved, to continue from
    assert (tmp_path / "checkpoints" / "step_000001" / "trainer_state.json").is_file()
    assert f"continue with trainer.resume=true output_dir={tmp_path}" in out
