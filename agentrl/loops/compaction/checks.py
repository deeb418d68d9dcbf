"""`context_problems`: `agent.context` checked at start, against the loop and the rollout's lengths."""

from __future__ import annotations

from agentrl.config.schema import AgentRLConfig
from agentrl.errors import UserError
from agentrl.loops.base import LOOPS
from agentrl.loops.compaction.strategies import resolve_strategy
from agentrl.loops.hooks import loop_name

SUMMARY_PROMPT_ROOM = 64  # tokens of the summary request, beside the summary itself


def context_problems(cfg: AgentRLConfig) -> list[str]:
    """The budget fits between a turn and the server's context, the strategy exists, and the loop compacts."""
    context = cfg.agent.context
    if context.max_tokens is None:
        return []
    problems = []
    max_model_len, turn = cfg.rollout.max_model_len, cfg.rollout.max_tokens
    if context.max_tokens >= max_model_len:
        problems.append(
            f"agent.context.max_tokens={context.max_tokens} must be below rollout.max_model_len={max_model_len} "
            "(compaction makes room before the server's limit is reached); lower it"
        )
    if context.max_tokens <= turn:
        problems.append(
            f"agent.context.max_tokens={context.max_tokens} leaves no room for a turn of rollout.max_tokens={turn}; "
            "raise it well above the first prompt plus a turn"
        )
    try:
        resolve_strategy(context.strategy)
    except UserError as exc:
        problems.append(str(exc))
    if context.strategy == "summarize" and context.max_tokens + context.summary_max_tokens + SUMMARY_PROMPT_ROOM > (
        max_model_len
    ):
        problems.append(
            f"agent.context.strategy=summarize writes its summary after the conversation reached max_tokens="
            f"{context.max_tokens}: with summary_max_tokens={context.summary_max_tokens} and its request (~"
            f"{SUMMARY_PROMPT_ROOM} tokens) that exceeds rollout.max_model_len={max_model_len}; lower "
            "agent.context.max_tokens or summary_max_tokens"
        )
    return problems + _loop_problems(cfg)


def _loop_problems(cfg: AgentRLConfig) -> list[str]:
    name = loop_name(cfg)
    try:
        loop = LOOPS.get(name)
    except UserError:
        return []  # reported by the agent checks
    if loop.compacts_context:
        return []
    why = (
        loop.no_compaction_reason
        or f"the {loop.__name__} loop cannot compact its episodes (tool_agent and swe_agent can)"
    )
    return [f"agent.context.max_tokens is set, but {why}; remove agent.context.max_tokens"]
