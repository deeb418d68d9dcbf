"""Every script in `benchmarks/` runs in its quick mode and prints its JSON line, so that none rots unnoticed (a
smoke: what it measures is never asserted, these machines are too noisy for that). A script is any file there
with a `__main__` block; one without `--quick` fails here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(p.name for p in (ROOT / "benchmarks").glob("*.py") if "__main__" in p.read_text())
TIMEOUT_S = 300


def test_the_benchmarks_are_found():
    assert {"distributed_rollout.py", "async_training.py", "weight_sync.py"} <= set(SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_benchmark_runs_in_its_quick_mode_and_prints_its_json_line(
    script, default_model_path, sandbox_base_image, easy_task
):
    source = (ROOT / "benchmarks" / script).read_text()
    assert '"--quick"' in source, f"benchmarks/{script} has no --quick mode: add one (a smoke CI runs)"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("RAY_ADDRESS", None)  # a benchmark starts and stops its own Ray instance, never the tests' cluster
    done = subprocess.run(
        [sys.executable, f"benchmarks/{script}", "--quick"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"benchmarks/{script} --quick exited {done.returncode}:\n{done.stderr[-3000:]}"
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    figures = json.loads(last)
    assert isinstance(figures, dict) and figures, f"benchmarks/{script}'s last line is not a JSON object: {last!r}"
