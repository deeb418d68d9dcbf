"""`ContextManager`: one episode's context budget (`agent.context`), kept by its `AgentContext`.

Before each turn, when the conversation and a whole turn (`rollout.max_tokens`) would not fit in `max_tokens`, or
messages are waiting that did not fit, the strategy rewrites the conversation and the episode continues from it in
a new step sample (`AgentContext.new_step_sample`'s mechanism: each step sample token-exact on its own, trained
with the episode's advantage or its turns' credit). Each compaction is recorded in
`trajectory.metadata["context"]["compactions"]`. The episode ends as `context_exhausted` (why: in
`metadata["context"]["exhausted"]`) when what the strategy
keeps still leaves no room for a turn, or after `max_compactions`; `agent.max_total_tokens` still caps the whole
episode (`context_overflow`).
"""

from __future__ import annotations

import copy
import inspect
from dataclasses import asdict, dataclass
from typing import Any, NoReturn

from agentrl.config.schema import ContextConfig
from agentrl.loops.compaction.strategies import CompactionRequest, Strategy, resolve_strategy
from agentrl.loops.context import AgentContext, StopLoop
from agentrl.types import Message, StopReason


@dataclass
class Compaction:
    """One rewrite of the conversation.

    Attributes:
        turn: the assistant turns played before it.
        strategy: `agent.context.strategy`.
        tokens_before: the conversation's tokens (those waiting to be added included).
        tokens_after: the new step sample's prompt tokens.
        step_sample: the index (in `step_samples()` order, all of them counted) of the step sample it starts.
    """

    turn: int
    strategy: str
    tokens_before: int
    tokens_after: int
    step_sample: int


class ContextManager:
    """The context budget of one episode; `copy()` gives a forked child its own."""

    def __init__(self, config: ContextConfig, strategy: Strategy | None = None):
        if config.max_tokens is None:
            raise ValueError("ContextManager needs agent.context.max_tokens")
        self.config = config
        self.max_tokens: int = config.max_tokens
        self.strategy = strategy or resolve_strategy(config.strategy)
        self.head: int | None = None  # messages of the first prompt
        self.pending: list[Message] = []  # added after the budget was reached; they join the next compaction
        self.pending_tokens = 0
        self.episode_tokens = 0  # the first prompt and every token generated or added after it
        self.compacting = False
        self.records: list[Compaction] = []

    def copy(self) -> ContextManager:
        child = copy.copy(self)
        child.pending, child.records = list(self.pending), list(self.records)
        return child

    def started(self, ctx: AgentContext) -> None:
        """The first prompt was rendered: remember it (it is always kept) and count its tokens."""
        if self.head is None:
            self.head = len(ctx.trajectory.messages)
            self.episode_tokens = ctx.builder.num_tokens

    def fits(self, ctx: AgentContext, new_tokens: int) -> bool:
        """Whether `new_tokens` more can join the conversation now (else they wait for the next compaction)."""
        return not self.pending and ctx.builder.num_tokens + new_tokens <= self.max_tokens

    def hold(self, messages: list[Message], tokens: int) -> None:
        self.pending += messages
        self.pending_tokens += tokens

    async def make_room(self, ctx: AgentContext, turn_tokens: int, policy: str | None, player: str | None) -> None:
        """Compact when the next turn would not fit.

        Raises:
            StopLoop(context_exhausted): `max_compactions` reached, or what the strategy keeps leaves no room.
        """
        if self.fits(ctx, turn_tokens):
            return

        if len(self.records) >= self.config.max_compactions:
            self._exhausted(
                ctx, f"agent.context.max_compactions={self.config.max_compactions} reached and the conversation is full"
            )
        before = ctx.builder.num_tokens + self.pending_tokens
        messages = await self._rewrite(ctx, policy, player)
        ids = ctx.builder.prompt_ids(messages, True)
        if len(ids) + turn_tokens > self.max_tokens:
            self._exhausted(
                ctx,
                f"after {self.config.strategy}, the conversation still has {len(ids)} tokens: with a turn of "
                f"{turn_tokens} it exceeds agent.context.max_tokens={self.max_tokens}",
            )
        ctx.restart_from(messages)
        self.pending, self.pending_tokens = [], 0
        index = len(ctx.trajectory.earlier_steps)
        self.records.append(Compaction(ctx.trajectory.num_turns, self.config.strategy, before, len(ids), index))
        ctx.trajectory.metadata.setdefault("context", {})["compactions"] = [asdict(r) for r in self.records]
        metrics = ctx.trajectory.metrics
        metrics["loop/compactions"] = float(len(self.records))

    def _exhausted(self, ctx: AgentContext, why: str) -> NoReturn:
        """End the episode as context_exhausted, saying why in `metadata["context"]["exhausted"]`."""
        ctx.trajectory.metadata.setdefault("context", {})["exhausted"] = why
        raise StopLoop(StopReason.CONTEXT_EXHAUSTED, why)

    async def _rewrite(self, ctx: AgentContext, policy: str | None, player: str | None) -> list[Message]:
        conversation = [*ctx.trajectory.messages, *self.pending]
        request = CompactionRequest(conversation, self.head or 0, len(self.pending), self.config, ctx, policy, player)
        self.compacting = True
        try:
            result: Any = self.strategy(request)
            return list(await result if inspect.isawaitable(result) else result)
        except StopLoop as stop:
            sequence_room, episode_room = ctx.rooms()
            if stop.reason != StopReason.CONTEXT_OVERFLOW or episode_room <= sequence_room:
                raise  # not a compaction's problem: the episode's own budget (agent.max_total_tokens) is spent
            self._exhausted(
                ctx,
                f"{self.config.strategy} needed more room than rollout.max_model_len leaves ({stop}); lower "
                "agent.context.max_tokens or the strategy's own budget (summary_max_tokens)",
            )
        finally:
            self.compacting = False
