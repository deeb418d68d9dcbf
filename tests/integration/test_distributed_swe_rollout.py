"""`agentrl rollout recipe=swe_agent rollout.workers=2` on a simulated three-node Ray cluster on this machine: the
head node has no Docker resource, two worker nodes do (`docker: 1`), so each rollout worker lands on its own
sandbox node. The real model, real SWE task images and Docker sandboxes; trajectories run on both worker nodes,
their tokens are the conversation's, and no container is left."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agentrl.cli import main
from agentrl.loops.drift import check_drift
from agentrl.ray_cluster import FORWARDED_ENV
from agentrl.sandbox.docker import LABEL
from agentrl.swe.task import load_tasks
from agentrl.types import Trajectory

pytestmark = pytest.mark.integration

RECIPE_DATA = Path(__file__).resolve().parents[2] / "recipes" / "swe_agent" / "data"


@pytest.fixture(scope="module")
def three_node_cluster():
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    nodes = [cluster.add_node(num_cpus=1, resources={"docker": 1}) for _ in range(2)]
    env = {k: os.environ[k] for k in FORWARDED_ENV if k in os.environ}
    ray.init(address=cluster.address, runtime_env={"env_vars": env}, log_to_driver=False)
    yield {node.node_id for node in nodes}
    ray.shutdown()
    cluster.shutdown()


def rows_with_images(docker_client, count: int) -> list[str]:
    """The first `count` lines of the bundled held-out task file, their task images built first when missing (as
    a run's start would: built here so that a test timing its run does not time the builds)."""
    from agentrl.swe.prepare import prepare_task_images

    file = RECIPE_DATA / "eval.jsonl"
    lines, tasks = file.read_text().splitlines()[:count], load_tasks(file)[:count]
    prepare_task_images([task.to_sample() for task in tasks])
    return lines


def sandbox_ids(docker_client) -> set[str]:
    """Every agentrl sandbox container now (SWE containers are labelled per trajectory, not per run)."""
    return {c.id for c in docker_client.containers.list(all=True, filters={"label": LABEL}, sparse=True)}


def test_swe_rollout_spreads_over_two_sandbox_nodes(three_node_cluster, docker_client, default_tokenizer, tmp_path):
    before = sandbox_ids(docker_client)
    data = tmp_path / "tasks.jsonl"
    data.write_text("\n".join(rows_with_images(docker_client, 2)) + "\n")
    out = tmp_path / "run"
    code = main(
        [
            "rollout",
            "recipe=swe_agent",
            f"data.eval_files=[{data}]",
            "rollout.workers=2",
            "rollout.num_cpus_per_worker=1",
            "rollout.worker_resources={docker: 1}",
            "rollout.worker_concurrency=2",
            "rollout.n=2",
            "rollout.max_tokens=48",
            "agent.max_turns=2",
            f"output_dir={out}",
        ]
    )
    assert code == 0
    trajectories = [Trajectory.from_json(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    assert len(trajectories) == 4
    assert {t.metadata["worker_node"] for t in trajectories} == three_node_cluster  # both sandbox nodes
    assert not [t for t in trajectories if t.failed], [t.error for t in trajectories]
    assert all(t.num_generated_tokens > 0 for t in trajectories)
    assert all(check_drift(default_tokenizer, t).kind != "template" for t in trajectories)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["trajectories"] == 4
    assert not sandbox_ids(docker_client) - before, "sandbox containers left behind"
