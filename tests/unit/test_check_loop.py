"""`check_loop`: every built-in loop keeps the loop contract, and loops that break it fail naming the property."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

import agentrl.models
from agentrl.cli import main
from agentrl.loops import AgentLoopBase, LoopCheckCase, LoopContractError, check_loop
from agentrl.loops.base import LOOPS, get_loop_class
from agentrl.loops.conformance.check import loop_problems
from agentrl.loops.context import AgentContext
from agentrl.loops.stepped import SteppedLoop
from agentrl.types import Message, Sample, Segment, Trajectory


@pytest.mark.parametrize("name", LOOPS.builtin_names())
def test_every_built_in_loop_keeps_the_loop_contract(name, tokenizer):
    case = get_loop_class(name).check_case()
    if case.needs:  # played where they run: tests/integration/test_check_loop_real.py
        pytest.skip(f"{name} needs {', '.join(sorted(case.needs))}")
    assert loop_problems(name, tokenizer)[1] == []


class RetokenizingLoop(AgentLoopBase):
    """Breaks `tokens`: appends the reply's text encoded again, with made-up logprobs, instead of its tokens."""

    async def run(self, sample: Sample, ctx: AgentContext) -> Trajectory:
        ctx.start(sample.prompt)
        out = await ctx.llm.generate(ctx.trajectory.token_ids, ctx.sampling)
        text = ctx.tokenizer.decode(out.token_ids, skip_special_tokens=True)
        ids = ctx.tokenizer.encode(text, add_special_tokens=False)
        ctx.trajectory.append(
            Segment(
                token_ids=ids,
                trainable=True,
                logprobs=[-1.0] * len(ids),
                policy_version=out.policy_version,
                temperature=ctx.sampling.temperature,
            )
        )
        ctx.trajectory.messages.append(Message(role="assistant", content=text))
        return ctx.trajectory


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


@dataclass
class Counter:
    moves: list[str] = field(default_factory=list)


class SharedStateForkLoop(SteppedLoop):
    """Breaks `fork`: its children's states share one list of moves, so a sibling's moves leak into the other."""

    async def begin(self, sample: Sample, ctx: AgentContext) -> Counter:
        ctx.start(sample.prompt)
        return Counter()

    async def step(self, ctx: AgentContext, state: Counter) -> bool:
        turn = await ctx.generate()
        state.moves.append(turn.text)
        if len(state.moves) < 3:
            ctx.add_messages([Message(role="user", content=f"Move {len(state.moves)} done.")])
            return False
        ctx.trajectory.reward = float(len(state.moves))
        return True

    async def end(self, ctx: AgentContext, state: Counter) -> None:
        return None

    async def fork_state(self, state: Counter, children: list[AgentContext]) -> list[Counter]:
        return [Counter(moves=state.moves) for _ in children]  # the bug: a shallow copy, one list of moves for all

    async def discard(self, state: Counter) -> None:
        return None


@pytest.mark.parametrize(
    ("loop", "prop", "says"),
    [
        (RetokenizingLoop, "tokens: ", "never re-tokenize"),
        (OneRewardForTwoPlayersLoop, "reward: ", "set Trajectory.player_rewards[role]"),
        (SharedStateForkLoop, "fork: ", "state.moves (list) is the same object as"),
    ],
)
def test_a_loop_that_breaks_the_contract_fails_naming_the_property(loop, prop, says, tokenizer):
    with pytest.raises(LoopContractError) as failed:
        check_loop(loop, tokenizer)
    named = [p for p in failed.value.problems if p.startswith(prop)]
    assert named and any(says in p for p in named), failed.value.problems


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
