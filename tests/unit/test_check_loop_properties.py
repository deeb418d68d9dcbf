"""`check_loop` can fail on every property it reports: for each, a loop that breaks that property alone, and the
check naming it alone (after Gymnasium's broken environments in `tests/utils/test_env_checker.py`)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from agentrl.loops import AgentLoopBase, LoopContractError, check_loop
from agentrl.loops.context import AgentContext, StopLoop
from agentrl.loops.stepped import SteppedLoop
from agentrl.rollout.protocol import SamplingParams
from agentrl.types import Message, Sample, StopReason, Trajectory
from tests.unit.test_check_loop import OneRewardForTwoPlayersLoop

HINT = "Hint: say hello."


class RetokenizingLoop(AgentLoopBase):
    """Breaks `tokens`: replaces the reply's tokens with its text encoded again, with made-up logprobs."""

    async def run(self, sample: Sample, ctx: AgentContext) -> Trajectory:
        ctx.start(sample.prompt)
        before = len(ctx.trajectory.segments)
        await ctx.generate()
        reply = ctx.trajectory.segments[before:]
        text = ctx.tokenizer.decode([t for s in reply for t in s.token_ids])
        ids = ctx.tokenizer.encode(text, add_special_tokens=False)
        ctx.trajectory.segments[before:] = [
            reply[-1].model_copy(update={"token_ids": ids, "logprobs": [-1.0] * len(ids)})
        ]
        return ctx.trajectory


class _Hinting:
    """A model client that asks for each reply with a hint after the prompt."""

    def __init__(self, llm, hint_ids: list[int]):
        self.llm, self.hint_ids = llm, hint_ids

    async def generate(self, prompt_ids: list[int], sampling: SamplingParams, session_id: str | None = None):
        return await self.llm.generate(prompt_ids + self.hint_ids, sampling, session_id)


class HintedLoop(AgentLoopBase):
    """Breaks `context`: the model sees a hint that the trajectory never records, so the reply is trained as if
    sampled from the prompt alone."""

    async def run(self, sample: Sample, ctx: AgentContext) -> Trajectory:
        ctx.llm = _Hinting(ctx.llm, ctx.tokenizer.encode(HINT, add_special_tokens=False))
        ctx.start(sample.prompt)
        await ctx.generate()
        return ctx.trajectory


class LateNewStepLoop(AgentLoopBase):
    """Breaks `context`: generates its second reply from the whole conversation, then records it in a new step
    sample that opens with a summary instead."""

    async def run(self, sample: Sample, ctx: AgentContext) -> Trajectory:
        ctx.start(sample.prompt)
        await ctx.generate()
        ctx.add_messages([Message(role="user", content="Again.")])
        before = len(ctx.trajectory.segments)
        await ctx.generate()
        reply = ctx.trajectory.segments[before:]
        del ctx.trajectory.segments[before:], ctx.trajectory.messages[-1]
        ctx.new_step_sample([Message(role="user", content="You said hello. Again.")])
        pieces = [(s.token_ids, s.logprobs, s.policy_version) for s in reply]
        ctx.builder.add_generation_pieces(pieces, reply[0].temperature)
        return ctx.trajectory


class TidiedReplyLoop(AgentLoopBase):
    """Breaks `drift`: tidies the reply's message after generating it, so the messages no longer render to the
    tokens."""

    async def run(self, sample: Sample, ctx: AgentContext) -> Trajectory:
        ctx.start(sample.prompt)
        turn = await ctx.generate()
        messages = ctx.trajectory.messages
        messages[-1] = messages[-1].model_copy(update={"content": turn.text.upper()})
        return ctx.trajectory


class MergedPiecesLoop(AgentLoopBase):
    """Breaks `attribution`: merges a reply that was resumed after a weight push into one segment, stamped with
    the version of its last piece."""

    async def run(self, sample: Sample, ctx: AgentContext) -> Trajectory:
        ctx.start(sample.prompt)
        before = len(ctx.trajectory.segments)
        await ctx.generate()
        pieces = ctx.trajectory.segments[before:]
        ctx.trajectory.segments[before:] = [
            pieces[-1].model_copy(
                update={
                    "token_ids": [t for p in pieces for t in p.token_ids],
                    "logprobs": [lp for p in pieces for lp in p.logprobs or []],
                }
            )
        ]
        return ctx.trajectory


class CachedVersionLoop(AgentLoopBase):
    """Breaks `attribution`: stamps every reply with the version of the episode's first, as if cached."""

    async def run(self, sample: Sample, ctx: AgentContext) -> Trajectory:
        ctx.start(sample.prompt)
        await ctx.generate()
        first = ctx.trajectory.segments[-1].policy_version
        ctx.add_messages([Message(role="user", content="Again.")])
        before = len(ctx.trajectory.segments)
        await ctx.generate()
        for seg in ctx.trajectory.segments[before:]:
            seg.policy_version = first
        return ctx.trajectory


class SwallowingLoop(AgentLoopBase):
    """Breaks `failure`: a model call that raises ends the episode as done, so it would be trained on."""

    async def run(self, sample: Sample, ctx: AgentContext) -> Trajectory:
        ctx.start(sample.prompt)
        try:
            await ctx.generate()
        except RuntimeError:
            ctx.trajectory.stop_reason = StopReason.DONE
        return ctx.trajectory


class IgnoresMaxTurnsLoop(AgentLoopBase):
    """Breaks `budgets`: stops quietly when `agent.max_turns` is reached, as if the episode were done."""

    async def run(self, sample: Sample, ctx: AgentContext) -> Trajectory:
        ctx.start(sample.prompt)
        for turn in range(3):
            try:
                await ctx.generate()
            except StopLoop as stop:
                if stop.reason != StopReason.MAX_TURNS:
                    raise
                break
            if turn < 2:
                ctx.add_messages([Message(role="user", content="Again.")])
        ctx.trajectory.stop_reason = StopReason.DONE
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


class HeartbeatLoop(AgentLoopBase):
    """Breaks `cancellation`: starts a heartbeat task and stops it only when the episode ends normally."""

    async def run(self, sample: Sample, ctx: AgentContext) -> Trajectory:
        heartbeat = asyncio.create_task(asyncio.sleep(3600))
        ctx.start(sample.prompt)
        await ctx.generate()
        heartbeat.cancel()
        return ctx.trajectory


@pytest.mark.parametrize(
    ("loop", "prop", "says"),
    [
        (RetokenizingLoop, "tokens", "never re-tokenize"),
        (HintedLoop, "context", HINT),
        (LateNewStepLoop, "context", "where the step sample holds 'You said hello. Again."),
        (TidiedReplyLoop, "drift", "differs from its messages re-rendered"),
        (MergedPiecesLoop, "attribution", "another version than the one the server reported"),
        (CachedVersionLoop, "attribution", "another version than the one the server reported"),
        (OneRewardForTwoPlayersLoop, "reward", "set Trajectory.player_rewards[role]"),
        (SwallowingLoop, "failure", "not as a failure"),
        (IgnoresMaxTurnsLoop, "budgets", "agent.max_turns=1"),
        (SharedStateForkLoop, "fork", "state.moves (list) is the same object as"),
        (HeartbeatLoop, "cancellation", "asyncio tasks outlived the cancelled episode"),
    ],
)
def test_a_loop_that_breaks_one_property_is_reported_for_that_property_alone(loop, prop, says, tokenizer):
    with pytest.raises(LoopContractError) as failed:
        check_loop(loop, tokenizer)
    problems = failed.value.problems
    assert all(p.startswith(f"{prop}: ") for p in problems), problems
    assert any(says in p for p in problems), problems
