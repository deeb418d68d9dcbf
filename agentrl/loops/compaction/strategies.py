"""The ways a conversation is made shorter (`agent.context.strategy`), and the registry of users' own.

A strategy takes a `CompactionRequest` (the conversation, how many of its messages are the first prompt, the
settings, the episode's context) and returns the messages the episode continues from, or a coroutine of them. It
rewrites messages only: the new step sample is rendered from them by the chat template, token-exact on its own.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from agentrl.config.schema import ContextConfig
from agentrl.errors import UserError
from agentrl.loops.context import AgentContext
from agentrl.types import Message


@dataclass
class CompactionRequest:
    """What a strategy is given.

    Attributes:
        conversation: the messages so far, the ones that did not fit yet (`pending`) last.
        head: how many of them are the first prompt (system message, worked examples, the task), always kept.
        pending: how many at the end were added after the budget was reached (never in the tokens yet).
        config: `agent.context`.
        ctx: the episode's context (the `summarize` strategy generates with it).
        policy / player: who plays the turn about to be generated (a summary is theirs).
    """

    conversation: list[Message]
    head: int
    pending: int
    config: ContextConfig
    ctx: AgentContext
    policy: str | None = None
    player: str | None = None


Strategy = Callable[[CompactionRequest], "list[Message] | Awaitable[list[Message]]"]
CONTEXT_STRATEGIES: dict[str, Strategy] = {}


def register_context_strategy(name: str) -> Callable[[Strategy], Strategy]:
    """Register a strategy under `name`, for `agent.context.strategy=name`."""

    def register(fn: Strategy) -> Strategy:
        CONTEXT_STRATEGIES[name] = fn
        return fn

    return register


def resolve_strategy(name: str) -> Strategy:
    """A registered strategy, or the function a `module:function` path names.

    Raises:
        UserError: neither.
    """
    if name in CONTEXT_STRATEGIES:
        return CONTEXT_STRATEGIES[name]
    known = ", ".join(sorted(CONTEXT_STRATEGIES))
    if ":" not in name:
        raise UserError(f"agent.context.strategy={name!r} is not known: use one of {known}, or a module:function path")
    module, _, attr = name.partition(":")
    try:
        fn = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise UserError(
            f"agent.context.strategy={name!r} cannot be imported ({exc}); the built-in ones: {known}"
        ) from None
    if not callable(fn):
        raise UserError(f"agent.context.strategy={name!r} is not a function of a CompactionRequest")
    return fn


@register_context_strategy("drop_tool_outputs")
def drop_tool_outputs(request: CompactionRequest) -> list[Message]:
    """Every tool output after the first prompt but the latest `keep_tool_outputs` becomes `placeholder`."""
    config, out = request.config, list(request.conversation)
    outputs = [
        i for i in range(request.head, len(out)) if out[i].role == "tool" and out[i].content != config.placeholder
    ]
    for i in outputs[: max(len(outputs) - config.keep_tool_outputs, 0)]:
        out[i] = out[i].model_copy(update={"content": config.placeholder})
    return out


@register_context_strategy("window")
def window(request: CompactionRequest) -> list[Message]:
    """The first prompt and the last `keep_turns` turns (each turn: a reply and what answered it)."""
    head, body = request.conversation[: request.head], request.conversation[request.head :]
    replies = [i for i, m in enumerate(body) if m.role == "assistant"]
    if len(replies) <= request.config.keep_turns:
        return list(request.conversation)
    return [*head, *body[replies[-request.config.keep_turns] :]]


@register_context_strategy("summarize")
async def summarize(request: CompactionRequest) -> list[Message]:
    """The policy writes a summary of the episode so far (its tokens are generated in the step sample that ends
    here, so they are trained); the episode goes on from the first prompt, the summary and the messages that were
    waiting, less the tool results among them: the call that asked for them is summarised away, and a result
    without its call answers nothing (the policy calls again if it still needs it)."""
    config, ctx = request.config, request.ctx
    ctx.add_messages([Message(role="user", content=config.summary_prompt)])
    turn = await ctx.generate(
        continue_if_cut=True, policy=request.policy, player=request.player, max_tokens=config.summary_max_tokens
    )
    pending = request.conversation[len(request.conversation) - request.pending :] if request.pending else []
    summary = Message(role="user", content=f"{config.summary_prefix}\n{turn.text.strip()}")
    return [*request.conversation[: request.head], summary, *[m for m in pending if m.role != "tool"]]
