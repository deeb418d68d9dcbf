"""What an agent loop sees while it runs: the model, tools, sandbox, tokenizer, budgets and the trajectory."""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from agentrl.loops.builder import TemplateBoundaryError, TrajectoryBuilder
from agentrl.loops.policy_clients import client_for, learns
from agentrl.loops.protocols import TokenGenerator, Tokenizer
from agentrl.loops.resume import generate_resuming
from agentrl.rollout.protocol import SamplingParams
from agentrl.types import Message, Sample, StopReason, Trajectory

if TYPE_CHECKING:
    from agentrl.envs.gym import GymEpisode
    from agentrl.gui.browser import MiniWoBSession
    from agentrl.sandbox.base import Sandbox
    from agentrl.tools.toolset import ToolSet


def with_system_prompt(messages: list[Message], text: str) -> list[Message]:
    """Prepend `text` to the system message, or add one."""
    if messages and messages[0].role == "system":
        first = messages[0].model_copy(update={"content": f"{text}\n\n{messages[0].content or ''}".rstrip()})
        return [first, *messages[1:]]
    return [Message(role="system", content=text), *messages]


class StopLoop(Exception):
    """Raised inside a loop to end the trajectory with a stop reason (budgets raise it for you)."""

    def __init__(self, reason: StopReason, message: str = ""):
        super().__init__(message or reason.value)
        self.reason = reason


@dataclass
class Budgets:
    """Per-trajectory limits; each ends the trajectory with its own stop reason.

    Attributes:
        max_turns: assistant turns (stop_reason max_turns).
        max_tokens_per_turn: tokens of one assistant turn (a turn cut here: stop_reason max_tokens).
        max_total_tokens: prompt + response tokens of the trajectory (stop_reason context_overflow).
        max_model_len: the rollout server's context length (also context_overflow).
        continue_cut_turns: a turn cut at `max_tokens_per_turn` is returned to the loop (finish_reason "length")
            instead of ending the trajectory.
    """

    max_turns: int = 8
    max_tokens_per_turn: int = 256
    max_total_tokens: int = 2048
    max_model_len: int = 2048
    continue_cut_turns: bool = False


class ContextBudget(Protocol):
    """What `AgentContext` asks of an episode's context management (`agentrl.loops.compaction.ContextManager`)."""

    compacting: bool
    episode_tokens: int
    pending: list[Message]

    def copy(self) -> ContextBudget: ...

    def started(self, ctx: AgentContext) -> None: ...

    def fits(self, ctx: AgentContext, new_tokens: int) -> bool: ...

    def hold(self, messages: list[Message], tokens: int) -> None: ...

    async def make_room(self, ctx: AgentContext, turn_tokens: int, policy: str | None, player: str | None) -> None: ...


@dataclass
class Turn:
    """One assistant generation."""

    text: str
    token_ids: list[int]
    finish_reason: str


@dataclass
class AgentContext:
    """Everything one trajectory's loop may use. Built by the RolloutManager, one per trajectory."""

    sample: Sample
    trajectory: Trajectory
    llm: TokenGenerator
    tokenizer: Tokenizer
    sampling: SamplingParams
    budgets: Budgets = field(default_factory=Budgets)
    tools: ToolSet | None = None  # when the run has `tools:`
    sandbox: Sandbox | None = None  # a leased sandbox, when `sandbox.backend` is set (or the loop opened one)
    env: GymEpisode | MiniWoBSession | None = None  # the episode of an environment loop
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger("agentrl.loop"))
    tool_schemas: list[dict[str, Any]] | None = None  # passed to the chat template when it has a tools slot
    system_prompt: str | None = None  # merged into the prompt's system message by start()
    last_turn_cut: bool = False  # the latest reply was cut at max_tokens_per_turn (continue_cut_turns)
    resume_aborted: bool = False  # a generation the server aborts (weight push) continues from its prefix
    context: ContextBudget | None = None  # context management (`agent.context`), for loops that compact

    def __post_init__(self) -> None:
        self.builder = TrajectoryBuilder(self.tokenizer, self.trajectory, tools=self.tool_schemas)

    def fork(self, n: int) -> list[AgentContext]:
        """`n` contexts that continue this trajectory from where it is now: each child's trajectory holds the same
        tokens (segments with their logprobs, versions and temperatures), messages, turn count, rewards and
        metrics so far, under an id of its own. The model, tokenizer, sampling and budgets are shared; the loop's
        state (`SteppedLoop.fork_state`) gives each child its own environment, sandbox and tools."""
        children = []
        for _ in range(n):
            trajectory = self.trajectory.model_copy(deep=True, update={"id": uuid.uuid4().hex})
            child = dataclasses.replace(self, trajectory=trajectory)
            child.builder = self.builder.copy_for(trajectory)
            child.context = self.context.copy() if self.context is not None else None
            children.append(child)
        return children

    def start(self, messages: list[Message]) -> None:
        """Render the prompt; raises StopLoop(context_overflow) if it alone exceeds the budget."""
        if self.system_prompt:
            messages = with_system_prompt(messages, self.system_prompt)
        ids = self.builder.start(messages)
        if len(ids) >= min(self.budgets.max_total_tokens, self.budgets.max_model_len):
            raise StopLoop(StopReason.CONTEXT_OVERFLOW, f"prompt of {len(ids)} tokens leaves no room to generate")
        if self.context is not None:
            self.context.started(self)

    def new_step_sample(self, messages: list[Message]) -> None:
        """Set the conversation so far aside as an earlier step sample (`Trajectory.earlier_steps`) and start a
        new token sequence from `messages`, for a loop that rewrites its context (a window of recent turns, a
        summary). Each step sample is token-exact on its own and trains on its own turns; per-turn estimators
        count turns across them in order."""
        self._set_step_aside()
        self.start(messages)

    def restart_from(self, messages: list[Message]) -> None:
        """Set the conversation so far aside as an earlier step sample and continue from `messages` as they are
        (the system prompt already merged), ready for the next reply: a compaction's new step sample."""
        self._set_step_aside()
        self.builder.start(messages, True)

    def rooms(self) -> tuple[int, int]:
        """Tokens left: in this step sample's sequence, and in the episode (`agent.max_total_tokens`, which with
        context management counts the whole episode across its step samples)."""
        if self.context is None:
            room = min(self.budgets.max_total_tokens, self.budgets.max_model_len) - self.builder.num_tokens
            return room, room
        return (
            self.budgets.max_model_len - self.builder.num_tokens,
            self.budgets.max_total_tokens - self.context.episode_tokens,
        )

    def _set_step_aside(self) -> None:
        """Move the current token sequence, with the messages it was rendered from, to `earlier_steps`."""
        traj = self.trajectory
        if not traj.segments:
            return
        earlier = Trajectory(
            group_id=traj.group_id,
            sample_index=traj.sample_index,
            agent_name=traj.agent_name,
            segments=traj.segments,
            messages=traj.messages,
        )
        traj.earlier_steps.append(earlier)
        traj.segments, traj.messages = [], []

    def finish(self) -> None:
        """End the trajectory on the model's last reply: stop_reason done, or max_tokens if that reply was cut."""
        self.trajectory.stop_reason = StopReason.MAX_TOKENS if self.last_turn_cut else StopReason.DONE

    async def generate(
        self,
        continue_if_cut: bool | None = None,
        policy: str | None = None,
        player: str | None = None,
        **sampling_overrides: Any,
    ) -> Turn:
        """Generate one assistant turn from the whole trajectory so far and append it. `policy`: the policy that
        generates it, in a run with several (`policies:`; None: the first); its segments record the name.
        `player`: the episode's role that generates it, in a loop with roles (`AgentLoopBase.roles`); its segments
        record it, and its tokens train on that role's reward (`Trajectory.player_rewards`).

        Raises:
            StopLoop: max_turns before generating; context_overflow when the turn was cut by the trajectory's
                budget; max_tokens when cut at `max_tokens_per_turn`, unless `continue_if_cut` (None:
                `budgets.continue_cut_turns`), which returns the cut turn (finish_reason "length").
        """
        if self.trajectory.num_turns >= self.budgets.max_turns:
            raise StopLoop(StopReason.MAX_TURNS)
        per_turn = sampling_overrides.pop("max_tokens", self.budgets.max_tokens_per_turn)
        if self.context is not None and not self.context.compacting:
            await self.context.make_room(self, per_turn, policy, player)
        room = min(self.rooms())
        if room <= 0:
            raise StopLoop(StopReason.CONTEXT_OVERFLOW)
        max_tokens = min(per_turn, room)
        update: dict[str, Any] = {"max_tokens": max_tokens}
        if self.sampling.seed is not None:  # a seeded trajectory draws a different, reproducible seed every turn
            update["seed"] = self.sampling.seed + self.trajectory.num_turns
        sampling = self.sampling.model_copy(update={**update, **sampling_overrides})
        started = time.perf_counter()
        once = functools.partial(client_for(self.llm, policy).generate, session_id=self.trajectory.id)
        traj = self.trajectory
        out = await generate_resuming(once, traj.token_ids, sampling, self.resume_aborted, traj.metrics)
        self._time("generate_s", started)
        learning = learns(self.llm, policy)
        before = self.builder.num_tokens
        text = self.builder.add_generation_pieces(out.pieces, sampling.temperature, policy, learning, player)
        if self.context is not None:
            self.context.episode_tokens += self.builder.num_tokens - before
        self.trajectory.num_turns += 1
        if out.finish_reason == "abort":
            raise StopLoop(StopReason.ABORTED, "the rollout server aborted the request")
        self.last_turn_cut = out.finish_reason == "length"
        if self.last_turn_cut:
            if max_tokens < per_turn:
                raise StopLoop(StopReason.CONTEXT_OVERFLOW)
            if not (self.budgets.continue_cut_turns if continue_if_cut is None else continue_if_cut):
                raise StopLoop(StopReason.MAX_TOKENS)
            metrics = self.trajectory.metrics
            metrics["loop/cut_turns"] = metrics.get("loop/cut_turns", 0.0) + 1.0
        return Turn(text=text, token_ids=list(out.last.token_ids), finish_reason=out.finish_reason or "stop")

    def add_messages(self, messages: list[Message], add_generation_prompt: bool = True) -> None:
        """Append tool results / user turns / observations as the template's exact token suffix.

        When the chat template renders the conversation with them so that it no longer extends the tokens so far
        (it rewrote history, e.g. dropped earlier turns' `<think>` reasoning), the next turn's real prompt is that
        rendering: the conversation so far becomes an earlier step sample, a new one starts from the rendering of
        the whole conversation, and `loop/template_rewrites` counts it.

        With context management (`agent.context`), messages that would take the conversation past its budget wait
        for the compaction before the next turn, which rewrites the conversation with them.

        Raises:
            StopLoop(context_overflow): the messages do not fit in the token budget (nothing is appended).
        """
        if self.context is not None and self.context.pending and not self.context.compacting:
            self._hold(messages, self._estimate_tokens(messages, add_generation_prompt))
            return
        try:
            ids = self.builder.suffix_ids(messages, add_generation_prompt)
        except TemplateBoundaryError:
            self._restart_from_template([*self.trajectory.messages, *messages], add_generation_prompt)
            return
        if self.context is not None and not self.context.compacting and not self.context.fits(self, len(ids)):
            self._hold(messages, len(ids))
            return
        self._check_room(self.builder.num_tokens + len(ids), f"{len(ids)} tokens of new messages exceed the budget")
        if self.context is not None:
            self._check_episode_room(len(ids))
            self.context.episode_tokens += len(ids)
        self.builder.append_messages(messages, ids)

    def _hold(self, messages: list[Message], tokens: int) -> None:
        assert self.context is not None
        self._check_episode_room(tokens)
        self.context.episode_tokens += tokens
        self.context.hold(messages, tokens)

    def _estimate_tokens(self, messages: list[Message], add_generation_prompt: bool) -> int:
        """Tokens `messages` add after the conversation so far (those already waiting not rendered yet)."""
        try:
            return len(self.builder.suffix_ids(messages, add_generation_prompt))
        except TemplateBoundaryError:
            return len(self.builder.prompt_ids(messages, add_generation_prompt))

    def _check_episode_room(self, new_tokens: int) -> None:
        assert self.context is not None
        if self.context.episode_tokens + new_tokens >= self.budgets.max_total_tokens:
            message = f"the episode's {self.context.episode_tokens + new_tokens} tokens exceed agent.max_total_tokens"
            raise StopLoop(StopReason.CONTEXT_OVERFLOW, message)

    def _restart_from_template(self, conversation: list[Message], add_generation_prompt: bool) -> None:
        """Start a new step sample whose prompt is the template's rendering of the whole `conversation`."""
        ids = self.builder.prompt_ids(conversation, add_generation_prompt)
        self._check_room(len(ids), f"the re-rendered prompt of {len(ids)} tokens exceeds the budget")
        self._set_step_aside()
        self.builder.start(conversation, add_generation_prompt)
        metrics = self.trajectory.metrics
        metrics["loop/template_rewrites"] = metrics.get("loop/template_rewrites", 0.0) + 1.0

    def _check_room(self, total_tokens: int, message: str) -> None:
        limit = self.budgets.max_model_len
        if self.context is None:  # else agent.max_total_tokens caps the episode, not one step sample
            limit = min(self.budgets.max_total_tokens, limit)
        if total_tokens >= limit:
            raise StopLoop(StopReason.CONTEXT_OVERFLOW, message)

    def _time(self, key: str, started: float) -> None:
        timings = self.trajectory.timings
        timings[key] = timings.get(key, 0.0) + time.perf_counter() - started
