"""`agentrl check` from the command line on the loops that need what only this tier has, each with its recipe
(`CHECK_RECIPES`, as the custom-loop guide shows): a SWE task's container, a Harbor task's (an agent and the
reference solution), a MiniWoB page in headless Chromium, and an OpenEnv server agentrl starts. Each runs as a
user runs it, in a process of its own, and leaves no container behind."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agentrl.loops.conformance.recipe import CHECK_RECIPES

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def agentrl_check(loop: str, *settings: str) -> subprocess.CompletedProcess[str]:
    """`agentrl check loop=LOOP recipe=R` (its recipe in the table) with `settings`, from the repository's root."""
    command = [sys.executable, "-m", "agentrl.cli", "check", f"loop={loop}", f"recipe={CHECK_RECIPES[loop]}"]
    return subprocess.run([*command, *settings], cwd=ROOT, capture_output=True, text=True, timeout=900)


@pytest.fixture
def no_new_containers(docker_client):
    """Fails the test if a sandbox container appears during it and stays (the command runs in another process)."""
    from agentrl.sandbox.docker import LABEL

    def ours() -> set[str]:
        return {c.id for c in docker_client.containers.list(all=True, filters={"label": LABEL}, sparse=True)}

    before = ours()
    yield
    assert not ours() - before, "agentrl check left sandbox containers behind"


def assert_keeps(loop: str, done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0 and f"{loop}: keeps the loop contract" in done.stderr, (done.stdout, done.stderr)
    assert done.stdout == ""  # no broken property printed


def test_the_swe_loop_keeps_the_contract_in_its_task_container(easy_task, default_model_path, no_new_containers):
    # the smallest task, whose image the fixture built (the first task's image would be built by the command too)
    done = agentrl_check("swe_agent", f"task={easy_task.to_sample().id}")
    assert_keeps("swe_agent", done)


@pytest.mark.parametrize("loop", ["harbor_agent", "harbor_oracle"])
def test_the_harbor_loops_keep_the_contract_in_the_first_task_s_container(
    loop, sandbox_base_image, default_model_path, no_new_containers
):
    assert_keeps(loop, agentrl_check(loop))


def test_the_gui_loop_keeps_the_contract_in_a_browser(default_model_path):
    assert_keeps("gui_agent", agentrl_check("gui_agent"))


def test_the_openenv_loop_keeps_the_contract_against_its_server(default_model_path):
    pytest.importorskip("openenv.core")
    assert_keeps("openenv", agentrl_check("openenv"))
