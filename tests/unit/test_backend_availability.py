"""A rollout backend the run would start here but that is not installed is found by validation, before any model
loads, with the command that installs it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from agentrl.config.schema import RolloutConfig
from agentrl.rollout.servers.availability import backend_problem

ROOT = Path(__file__).resolve().parents[2]


def test_a_missing_vllm_names_the_install_script(monkeypatch):
    monkeypatch.setenv("AGENTRL_VLLM_VENV", "/nonexistent/vllm-venv")
    monkeypatch.delenv("AGENTRL_VLLM_PYTHON", raising=False)
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None)
    problem = backend_problem(RolloutConfig(backend="vllm"))
    assert problem is not None and "scripts/install_vllm.sh" in problem and "rollout.urls" in problem
    # servers it does not start here need nothing on this machine
    assert backend_problem(RolloutConfig(backend="vllm", urls=["http://h:1"])) is None
    assert backend_problem(RolloutConfig(backend="vllm", placement="ray")) is None
    assert backend_problem(RolloutConfig()) is None


def test_a_missing_sglang_says_what_to_do(monkeypatch):
    monkeypatch.delenv("AGENTRL_SGLANG_PYTHON", raising=False)
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None)
    problem = backend_problem(RolloutConfig(backend="sglang"))
    assert problem is not None and "agentrl[sglang]" in problem and "AGENTRL_SGLANG_PYTHON" in problem


def test_train_with_vllm_missing_exits_2_before_loading_anything():
    """Found by the preflight with nothing heavy imported (no torch), so it answers in well under 2 s."""
    env = {**os.environ, "AGENTRL_VLLM_VENV": "/nonexistent/vllm-venv", "HF_HUB_OFFLINE": "1"}
    env.pop("AGENTRL_VLLM_PYTHON", None)
    code = """
import sys
from agentrl.cli import main
rc = main(["train", "recipe=quickstart", "rollout.backend=vllm", "trainer.steps=2"])
print("RESULT", rc, sorted(m for m in ("torch", "transformers", "ray", "docker") if m in sys.modules))
"""
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    print(f"exit after {time.perf_counter() - started:.2f} s")  # measured, not asserted
    assert result.stdout.strip().splitlines()[-1] == "RESULT 2 []", result.stdout + result.stderr[-2000:]
    assert "scripts/install_vllm.sh" in result.stderr
