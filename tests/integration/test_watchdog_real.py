"""The run's watchdog with real processes: the only rollout server is paused (SIGSTOP) in the middle of step 2's
rollout; nothing progresses, and the run stops within twice its deadline with a report of what each task waits on
(the trajectories on the paused replica's requests), its step-1 state saved for `trainer.resume=true`."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest

from agentrl.cli import main
from agentrl.rollout.servers.hf.launch import launch_hf_server

pytestmark = pytest.mark.integration

DEADLINE_S = 10.0


def pause_in_step_2(process, run, paused: list[float], timeout: float = 300.0) -> None:
    """SIGSTOP the server once step 1 is logged and step 2's requests are in flight."""
    import httpx

    deadline = time.monotonic() + timeout
    metrics = run / "metrics.jsonl"
    while time.monotonic() < deadline:
        logged = metrics.exists() and any('"step": 1' in line for line in metrics.read_text().splitlines())
        if logged and httpx.get(f"{process.url}/health", timeout=5).json()["running"] > 0:
            os.kill(process.process.pid, signal.SIGSTOP)
            paused.append(time.monotonic())
            return
        time.sleep(0.05)


def test_a_run_whose_only_server_stalls_stops_with_a_report_and_its_state_saved(default_model_path, tmp_path, capsys):
    process = launch_hf_server(default_model_path, max_model_len=1024)
    run = tmp_path / "run"
    paused: list[float] = []
    pauser = threading.Thread(target=pause_in_step_2, args=(process, run, paused), daemon=True)
    pauser.start()
    try:
        code = main(
            [
                "train",
                "recipe=quickstart",
                "trainer.steps=3",
                "data.batch_size=2",
                "rollout.n=4",
                "rollout.max_tokens=24",
                "data.eval_files=[]",
                "rollout.backend=hf",
                f"rollout.urls=[{process.url}]",
                f"trainer.stall_timeout_s={DEADLINE_S}",
                "rollout.stall_timeout_s=600",  # the replica is not cut off first: the run has no other
                f"output_dir={run}",
            ]
        )
        stopped = time.monotonic()
        assert paused, "the server was never paused in step 2"
        detected = stopped - paused[0]
        err = capsys.readouterr().err
        print(f"FAULT rollout stalled: the run stopped {detected:.1f} s after the pause (deadline {DEADLINE_S:.0f} s)")
        assert code == 1 and "made no progress" in err and detected < 2 * DEADLINE_S + 5
        report = (run / "stall_report.txt").read_text()
        print(report)
        assert f"{process.url}: live, " in report and "requests in flight" in report
        assert "_attempt (client.py" in report  # the trajectories wait on the paused replica's requests
        assert "  trajectory " in report  # each named by its sample and index
        assert (run / "checkpoints" / "step_000001").is_dir()
        assert [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()] == [1]
    finally:
        os.kill(process.process.pid, signal.SIGCONT)
        process.stop()
