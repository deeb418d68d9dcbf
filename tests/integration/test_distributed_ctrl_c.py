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
        # a reply cut at max_tokens goes on to the next turn rather than ending the trajectory: six turns to
        # generate, so the interrupt lands while the trajectories run, not after the 135M model's first cut reply
        "agent.on_cut_turn=continue",
        f"output_dir={out}",
    ]
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}  # its own local Ray, not the module's
    env["HF_HUB_OFFLINE"] = "1"
    env["PYTHONFAULTHANDLER"] = "1"  # SIGABRT prints every thread's stack: where a run that ignored Ctrl-C hangs
    ray_before = ray_processes()
    log_path = tmp_path / "cli.log"  # a file, not a pipe: a pipe nobody reads fills up and blocks the child
    log = log_path.open("wb")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def output() -> str:
        return log_path.read_text(errors="replace")[-12000:]

    before = sandbox_ids(docker_client)

    def ours() -> set[str]:
        return sandbox_ids(docker_client) - before

    try:
        deadline = time.monotonic() + 300
        while not ours():  # the workers' sandboxes are up: the rollout is under way
            assert proc.poll() is None, output()
            assert time.monotonic() < deadline, f"no sandbox container ever started:\n{output()}"
            time.sleep(0.5)
        dispositions = signal_dispositions(proc.pid)  # why, if the interrupt goes unheeded
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=180)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)
            time.sleep(5)
            raise AssertionError(f"the CLI did not exit within 180 s of Ctrl-C; its stacks:\n{output()}") from None
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
        ray_left = wait_for_exit(ray_processes() - ray_before, timeout_s=30)
        for pid in ray_left:  # a Ray left running would be joined by the next test's ray.init
            os.kill(int(pid), signal.SIGKILL)
    assert proc.returncode != 0, f"{dispositions}; this process: {signal.getsignal(signal.SIGINT)}\n{output()}"
    assert not ours(), "sandbox containers left behind"
    # a worker process exits shortly after its raylet does: give it the same grace as the Ray processes
    workers = wait_for_exit(processes_matching("RolloutWorker"), timeout_s=30)
    assert not workers, f"rollout worker processes left: {workers}"
    assert not ray_left, f"the CLI's Ray processes were left running: {ray_left}"


def signal_dispositions(pid: int) -> str:
    """The process's blocked, ignored and caught signal masks (SIGINT is 0x2), from /proc."""
    with open(f"/proc/{pid}/status") as status:
        return " ".join(line.strip() for line in status if line.startswith(("SigBlk", "SigIgn", "SigCgt")))


def ray_processes() -> set[str]:
    """Pids of the Ray head processes on this machine (GCS server and raylet)."""
    return processes_matching("gcs_server|raylet")


def processes_matching(pattern: str) -> set[str]:
    """Pids of the processes whose command line matches `pattern` (pgrep -f)."""
    import subprocess

    return set(subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout.split())


def wait_for_exit(pids: set[str], timeout_s: float) -> set[str]:
    """Those of `pids` still running after up to `timeout_s` seconds."""
    import time

    deadline = time.monotonic() + timeout_s
    while pids and time.monotonic() < deadline:
        time.sleep(0.5)
        pids = {pid for pid in pids if os.path.exists(f"/proc/{pid}")}
    return pids
