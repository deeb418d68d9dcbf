"""Every script in `benchmarks/` runs in its quick mode and prints its JSON line, so that none rots unnoticed (a
smoke: what it measures is never asserted, these machines are too noisy for that). A script is any file there
with a `__main__` block; one without `--quick` fails here.

The smokes with neither Docker nor Ray in them (`BACKGROUND`) start with the session, one after another at the
lowest CPU priority, beside the other tests: those wait on containers, servers and sleeps for about a third of the
suite, and the smokes take that idle CPU instead of minutes of their own; their tests run last and collect them.
The others run in their test: those with containers or Ray (which other tests count machine-wide)."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.integration.smokes import (
    BACKGROUND,
    ROOT,
    SCRIPTS,
    TIMEOUT_S,
    smoke_command,
    smoke_env,
)

pytestmark = pytest.mark.integration


def test_the_benchmarks_are_found():
    assert {"distributed_rollout.py", "async_training.py", "weight_sync.py"} <= set(SCRIPTS)
    assert set(BACKGROUND) <= set(SCRIPTS), "a background smoke's script is gone: update BACKGROUND"


@pytest.mark.parametrize("script", [s for s in SCRIPTS if s not in BACKGROUND])
def test_a_benchmark_runs_in_its_quick_mode_and_prints_its_json_line(
    script, default_model_path, sandbox_base_image, easy_task
):
    source = (ROOT / "benchmarks" / script).read_text()
    assert '"--quick"' in source, f"benchmarks/{script} has no --quick mode: add one (a smoke CI runs)"
    done = subprocess.run(
        smoke_command(script), cwd=ROOT, env=smoke_env(), capture_output=True, text=True, timeout=TIMEOUT_S,
        check=False,
    )  # fmt: skip
    assert_prints_its_json_line(script, done)


@pytest.mark.parametrize("script", BACKGROUND)
def test_a_long_benchmark_ran_in_its_quick_mode_beside_the_others_and_printed_its_json_line(script, background_smokes):
    assert '"--quick"' in (ROOT / "benchmarks" / script).read_text(), f"benchmarks/{script} has no --quick mode"
    assert_prints_its_json_line(script, background_smokes.result(script))


def assert_prints_its_json_line(script: str, done: subprocess.CompletedProcess) -> None:
    assert done.returncode == 0, f"benchmarks/{script} --quick exited {done.returncode}:\n{done.stderr[-3000:]}"
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    figures = json.loads(last)
    assert isinstance(figures, dict) and figures, f"benchmarks/{script}'s last line is not a JSON object: {last!r}"
