"""`check_loop`: every built-in loop keeps the loop contract, from Python and from the command line (a loop that
breaks each property: `test_check_loop_properties.py`)."""

from __future__ import annotations

import pytest

import agentrl.models
from agentrl.cli import main
from agentrl.loops import AgentLoopBase, LoopCheckCase
from agentrl.loops.base import LOOPS, get_loop_class
from agentrl.loops.conformance.check import loop_problems
from agentrl.loops.context import AgentContext
from agentrl.types import Message, Sample, Trajectory


@pytest.mark.parametrize("name", LOOPS.builtin_names())
def test_every_built_in_loop_keeps_the_loop_contract(name, tokenizer):
    case = get_loop_class(name).check_case()
    if case.needs:  # played where they run: tests/integration/test_check_loop_real.py
        pytest.skip(f"{name} needs {', '.join(sorted(case.needs))}")
    assert loop_problems(name, tokenizer)[1] == []


class OneRewardForTwoPlayersLoop(AgentLoopBase):
    """Breaks `reward`: two roles reply, and the episode has only one reward for both."""

    roles = ("first", "second")

    async def run(self, sample: Sample, ctx: AgentContext) -> Trajectory:
        ctx.start(sample.prompt)
        await ctx.generate(player="first")
        ctx.add_messages([Message(role="user", content="Your turn, second player.")])
        await ctx.generate(player="second")
        ctx.trajectory.reward = 1.0  # player 0 won: the second player is rewarded for losing
        return ctx.trajectory


def test_the_command_exits_1_with_one_line_per_broken_property_and_0_when_the_contract_holds(
    tokenizer, monkeypatch, capsys
):
    monkeypatch.setattr(agentrl.models, "load_tokenizer", lambda path: tokenizer)
    monkeypatch.setattr(agentrl.models, "resolve_model", lambda name, **kwargs: name)
    assert main(["check", "loop=single_turn"]) == 0
    assert "single_turn: keeps the loop contract" in capsys.readouterr().err
    assert main(["check", f"loop={__name__}:OneRewardForTwoPlayersLoop"]) == 1
    out = capsys.readouterr()
    assert out.out.startswith("reward: ") and "breaks the loop contract" in out.err
    assert main(["check", "loop=no_such_loop"]) == 2
    assert "unknown agent loop 'no_such_loop'" in capsys.readouterr().err
    assert main(["check"]) == 2 and "needs loop=NAME" in capsys.readouterr().err
    assert main(["check", "loop=textarena", "agent.kwargs.env_id=NoSuchGame-v0"]) == 2  # settings over its case
    assert "textarena has no game 'NoSuchGame-v0'" in capsys.readouterr().err


def test_a_case_the_loop_cannot_play_is_reported_with_what_to_fix(tokenizer):
    class NeedsCandidates(get_loop_class("referential_game")):
        @classmethod
        def check_case(cls) -> LoopCheckCase:
            return LoopCheckCase()  # no candidates: the game refuses the row

    _, problems = loop_problems(NeedsCandidates, tokenizer)
    assert len(problems) == 1 and problems[0].startswith("play: the check episode failed")
    assert "extra_info.candidates" in problems[0]


def test_the_guide_s_example_loop_keeps_the_contract_with_its_own_case(tokenizer):
    name, problems = loop_problems("examples.custom_loop:GuessNumberLoop", tokenizer)
    assert problems == [] and name == "examples.custom_loop:GuessNumberLoop"
