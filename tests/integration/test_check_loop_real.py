"""`check_loop` on the loops that need what only this tier has, each played with its recipe's own setup: a SWE
task's container, a Harbor task's (an agent and the reference solution), a MiniWoB page in headless Chromium, and
an OpenEnv server agentrl starts."""

from __future__ import annotations

from typing import Any

import pytest

from agentrl.config import load_config
from agentrl.loops import LoopCheckCase
from agentrl.loops.conformance.check import loop_problems
from agentrl.loops.hooks import run_samples
from agentrl.types import Sample
from tests.integration.test_swe_easy_real import gold_call

pytestmark = pytest.mark.integration


def recipe(name: str, *overrides: str) -> tuple[dict[str, Any], list[Sample]]:
    """The recipe's config (as settings over a loop's check case) and its training samples."""
    cfg = load_config(overrides=[f"recipe={name}", *overrides])
    return cfg.model_dump(mode="json", by_alias=True), run_samples(cfg, "train")


def test_the_swe_loop_keeps_the_contract_in_its_task_container(easy_task, default_tokenizer, no_leftovers):
    config, _ = recipe("swe_easy")
    config["rollout"]["max_tokens"] = 128  # room for the gold edit_line call
    case = LoopCheckCase(config=config, sample=easy_task.to_sample(), reply=gold_call(easy_task))
    assert loop_problems("swe_agent", default_tokenizer, case)[1] == []


@pytest.mark.parametrize("loop", ["harbor_agent", "harbor_oracle"])
def test_the_harbor_loops_keep_the_contract(loop, sandbox_base_image, default_tokenizer, no_leftovers):
    config, samples = recipe("harbor")
    (hello,) = [s for s in samples if s.id == "agentrl/hello-file"]
    turns = 0 if loop == "harbor_oracle" else 1  # the reference solution asks the policy nothing
    case = LoopCheckCase(config=config, sample=hello, reply="I am done.", min_turns=turns)
    assert loop_problems(loop, default_tokenizer, case)[1] == []


def test_the_gui_loop_keeps_the_contract_in_a_browser(default_tokenizer):
    config, samples = recipe("gui_agent")
    (page,) = [s for s in samples if s.extra_info.get("task") == "click-test"][:1]
    case = LoopCheckCase(config=config, sample=page, reply="click(1)")
    assert loop_problems("gui_agent", default_tokenizer, case)[1] == []


def test_the_openenv_loop_keeps_the_contract_against_its_server(default_tokenizer):
    pytest.importorskip("openenv.core")
    config, samples = recipe("openenv")
    case = LoopCheckCase(config=config, sample=samples[0], reply="hello")
    assert loop_problems("openenv", default_tokenizer, case)[1] == []
