"""The benchmark smokes' runner (`test_benchmarks_smoke.py`), and the ones that run in the background."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(p.name for p in (ROOT / "benchmarks").glob("*.py") if "__main__" in p.read_text())
TIMEOUT_S = 300
BACKGROUND = (
    "vs_trl.py", "async_training.py", "train_step.py", "gateway.py", "rollout_throughput.py",
    "agent_loop_overhead.py", "shared_prefix.py", "server_prefill.py", "weight_sync.py",
)  # fmt: skip
"""Smokes with neither Docker nor Ray in them (they need only the model, or nothing; `weight_sync.py --quick` leaves
its containerised and Ray servers out): started with the session. The last six took 109 s of the suite's own time
in their tests before they moved here; the lane ends long before the suite does."""
BACKGROUND_TIMEOUT_S = 1200
"""Each background smoke's limit: at the lowest priority it runs slower while the other tests keep the CPU busy."""


def smoke_command(script: str) -> list[str]:
    return [sys.executable, f"benchmarks/{script}", "--quick"]


def smoke_env() -> dict[str, str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("RAY_ADDRESS", None)  # a benchmark starts and stops its own Ray instance, never the tests' cluster
    return env


class BackgroundSmokes:
    """The `BACKGROUND` smokes run one after another in a thread, each at nice 19; `result` waits for one."""

    def __init__(self, scripts: tuple[str, ...]) -> None:
        self.results: dict[str, subprocess.CompletedProcess | BaseException] = {}
        self.done = {script: threading.Event() for script in scripts}
        self.process: subprocess.Popen | None = None
        self.stopped = False
        self.thread = threading.Thread(target=self._run_all, args=(scripts,), name="benchmark-smokes", daemon=True)
        self.thread.start()

    def result(self, script: str) -> subprocess.CompletedProcess:
        """The finished smoke's process (raises what running it raised)."""
        assert self.done[script].wait(BACKGROUND_TIMEOUT_S * len(self.done)), f"benchmarks/{script} never finished"
        outcome = self.results[script]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def stop(self) -> None:
        self.stopped = True
        if self.process is not None and self.process.poll() is None:
            self.process.kill()

    def _run_all(self, scripts: tuple[str, ...]) -> None:
        for script in scripts:
            try:
                self.results[script] = self._run(script)
            except BaseException as exc:  # handed to the script's test
                self.results[script] = exc
            self.done[script].set()

    def _run(self, script: str) -> subprocess.CompletedProcess:
        if self.stopped:
            raise RuntimeError("the test session ended first")
        command = ["nice", "-n", "19", *smoke_command(script)]
        pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
        self.process = subprocess.Popen(command, cwd=ROOT, env=smoke_env(), text=True, **pipes)
        try:
            stdout, stderr = self.process.communicate(timeout=BACKGROUND_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise
        return subprocess.CompletedProcess(command, self.process.returncode, stdout, stderr)
