"""Ctrl-C of `agentrl rollout recipe=swe_agent rollout.workers=2` (its own local Ray): every worker cancels its
trajectories, whose containers are removed, and no worker process is left."""

from __future__ import annotations

import os

import pytest

from tests.integration.test_distributed_swe_rollout import rows_with_images, sandbox_ids

pytestmark = pytest.mark.integration


def test_ctrl_c_stops_every_worker_and_leaves_no_container_or_actor(docker_client, tmp_path):
    import signal
    import subprocess
    import sys
    import time

    data = tmp_path / "tasks.jsonl"
    data.write_text("\n".join(rows_with_images(docker_client, 2)) + "\n")
    out = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "agentrl.cli",
        "rollout",
        "recipe=swe_agent",
        f"data.eval_files=[{data}]",
        "rollout.workers=2",
        "rollout.num_cpus_per_worker=0.5",
        "rollout.n=2",
        "agent.max_turns=6",
        f"output_dir={out}",
    ]
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}  # its own local Ray, not the module's
    env["HF_HUB_OFFLINE"] = "1"
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)

    before = sandbox_ids(docker_client)

    def ours() -> set[str]:
        return sandbox_ids(docker_client) - before

    try:
        deadline = time.monotonic() + 300
        while not ours():  # the workers' sandboxes are up: the rollout is under way
            assert proc.poll() is None, proc.stdout.read().decode()[-3000:]
            assert time.monotonic() < deadline, "no sandbox container ever started"
            time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        output = proc.communicate(timeout=180)[0].decode()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode != 0, output[-2000:]
    assert not ours(), "sandbox containers left behind"
    workers = subprocess.run(["pgrep", "-f", "RolloutWorker"], capture_output=True, text=True).stdout.split()
    assert not workers, f"rollout worker processes left: {workers}"
