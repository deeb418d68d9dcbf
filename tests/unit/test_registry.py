"""The one `Registry` shape, exercised through each of the six extension kinds."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import pytest
import torch

from agentrl.errors import UserError
from agentrl.loops.base import LOOPS, AgentLoopBase, get_loop_class, register_loop
from agentrl.registry import Registry, RegistryConflictError, UnknownNameError
from agentrl.rewards.base import RewardResult
from agentrl.rewards.registry import REWARDS, register_reward, resolve_type
from agentrl.tools.base import Tool
from agentrl.tools.parsers.base import ParsedOutput, ToolCallParser
from agentrl.tools.parsers.registry import PARSERS, get_parser, register_parser
from agentrl.tools.registry import TOOLS, get_tool_class, register_tool
from agentrl.trainer.algorithms import get_advantage, register_advantage
from agentrl.trainer.losses import PolicyLoss, get_loss, register_loss
from agentrl.trainer.registry import ADVANTAGES, LOSSES


class MyLoop(AgentLoopBase):
    async def run(self, sample: Any, ctx: Any) -> Any:
        return ctx.trajectory


class OtherLoop(AgentLoopBase):
    async def run(self, sample: Any, ctx: Any) -> Any:
        return ctx.trajectory


class MyTool(Tool):
    name = "my_tool"
    description = "does nothing"
    parameters: dict[str, Any] = {"type": "object", "properties": {}}

    async def call(self, arguments: dict[str, Any], ctx: Any) -> str:
        return "ok"


class MyParser(ToolCallParser):
    def parse(self, text: str) -> ParsedOutput:
        return ParsedOutput(content=text)


class OtherTool(MyTool):
    name = "other_tool"


class OtherParser(MyParser):
    pass


def other_reward(inp: Any) -> RewardResult:
    return RewardResult(0.0)


def other_advantage(rewards: torch.Tensor, group_ids: Any, *, eps: float = 1e-6) -> torch.Tensor:
    return torch.zeros_like(rewards)


def other_surrogate(logp, old_logp, adv, mask, cfg):  # type: ignore[no-untyped-def]
    return adv * logp, {}


def my_reward(inp: Any) -> RewardResult:
    return RewardResult(1.0)


def my_advantage(rewards: torch.Tensor, group_ids: Any, *, eps: float = 1e-6) -> torch.Tensor:
    return torch.ones_like(rewards)


def my_surrogate(logp, old_logp, adv, mask, cfg):  # type: ignore[no-untyped-def]
    return -adv * logp, {}


@dataclass
class Kind:
    registry: Registry[Any]
    register: Any
    get: Any
    entry: Any
    other: Any
    dotted: str
    builtin: str

    def resolved(self, name: str) -> Any:
        return self.get(name)


KINDS = {
    "loops": Kind(LOOPS, register_loop, get_loop_class, MyLoop, OtherLoop, f"{__name__}:MyLoop", "tool_agent"),
    "tools": Kind(TOOLS, register_tool, get_tool_class, MyTool, OtherTool, f"{__name__}:MyTool", "bash"),
    "parsers": Kind(PARSERS, register_parser, PARSERS.get, MyParser, OtherParser, f"{__name__}:MyParser", "hermes"),
    "rewards": Kind(REWARDS, register_reward, REWARDS.get, my_reward, other_reward, f"{__name__}:my_reward", "math"),
    "advantages": Kind(
        ADVANTAGES, register_advantage, get_advantage, my_advantage, other_advantage, f"{__name__}.my_advantage", "rloo"
    ),
    "losses": Kind(LOSSES, register_loss, get_loss, my_surrogate, other_surrogate, f"{__name__}:my_surrogate", "cispo"),
}


@pytest.mark.parametrize("kind", KINDS, ids=str)
def test_unknown_name_lists_the_known_ones(kind: str) -> None:
    k = KINDS[kind]
    with pytest.raises(UnknownNameError) as raised:
        k.get("nope")
    message = str(raised.value)
    assert k.builtin in message and "dotted path" in message
    assert all(name in message for name in k.registry.names())


@pytest.mark.parametrize("kind", KINDS, ids=str)
def test_a_taken_name_is_refused(kind: str) -> None:
    k = KINDS[kind]
    with k.registry.scoped():
        k.register("test_taken")(k.entry)
        k.register("test_taken")(k.entry)  # the same definition again (a re-run cell) is fine
        with pytest.raises(RegistryConflictError, match="test_taken.*already registered"):
            k.register("test_taken")(k.other)
        with pytest.raises(RegistryConflictError, match="already registered"):
            k.register(k.builtin)(k.entry)  # a user entry cannot shadow a built-in
    assert "test_taken" not in k.registry


@pytest.mark.parametrize("kind", KINDS, ids=str)
def test_dotted_path_works_without_registering(kind: str) -> None:
    k = KINDS[kind]
    got = k.get(k.dotted)
    if kind == "losses":
        assert isinstance(got, PolicyLoss) and got.surrogate is my_surrogate and got.default_agg == "token-mean"
    else:
        assert got is k.entry
    assert k.dotted not in k.registry  # resolving a path registers nothing


@pytest.mark.parametrize("kind", KINDS, ids=str)
def test_built_ins_resolve(kind: str) -> None:
    k = KINDS[kind]
    assert k.builtin in k.registry.names()
    assert k.registry.problem(k.builtin) is None
    assert k.get(k.builtin) is not None


def test_a_path_to_the_wrong_kind_of_object_is_an_error() -> None:
    with pytest.raises(UserError, match="not an AgentLoopBase subclass"):
        get_loop_class(f"{__name__}:MyTool")
    with pytest.raises(UserError, match="not a ToolCallParser subclass"):
        get_parser(f"{__name__}:MyLoop")
    with pytest.raises(UserError, match="type: unknown reward type 'nope'"):
        resolve_type("nope", "reward.components[0]")


def test_override_is_scoped() -> None:
    with LOOPS.override("single_turn", MyLoop):
        assert get_loop_class("single_turn") is MyLoop
    assert get_loop_class("single_turn") is not MyLoop
    with LOOPS.override("brand_new", MyLoop):
        assert "brand_new" in LOOPS
    assert "brand_new" not in LOOPS


def test_problem_checks_names_without_importing_built_ins() -> None:
    assert TOOLS.problem("editor") is None
    assert "unknown tool 'edtor'. Did you mean 'editor'?" in (TOOLS.problem("edtor") or "")
    assert "cannot import" in (TOOLS.problem("no_such_pkg.tools:Tool") or "")


def test_importing_agentrl_imports_no_loop_tool_or_reward_module() -> None:
    code = """
import sys
import agentrl, agentrl.loops, agentrl.tools, agentrl.rewards, agentrl.registry, agentrl.trainer.registry
from agentrl.config import load_config
implementations = [
    "agentrl.loops.single_turn", "agentrl.loops.tool_calling", "agentrl.loops.swe", "agentrl.loops.gui",
    "agentrl.loops.gym", "agentrl.tools.builtin.shell", "agentrl.tools.builtin.editor", "agentrl.tools.builtin.submit",
    "agentrl.tools.parsers.hermes", "agentrl.tools.parsers.llama3_json", "agentrl.rewards.rule",
    "agentrl.rewards.judge", "agentrl.rewards.model", "agentrl.rewards.similarity", "agentrl.rewards.swe",
    "agentrl.trainer.algorithms", "agentrl.trainer.losses", "torch",
]
print(sorted(m for m in implementations if m in sys.modules))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
