"""Context management for multi-turn loops (`agent.context`): compaction strategies and their registry, and the
per-episode budget that applies them (`ContextManager`). Guide: docs/guides/context.md."""

from agentrl.loops.compaction.manager import Compaction, ContextManager
from agentrl.loops.compaction.strategies import (
    CONTEXT_STRATEGIES,
    CompactionRequest,
    register_context_strategy,
    resolve_strategy,
)

__all__ = [
    "CONTEXT_STRATEGIES",
    "Compaction",
    "CompactionRequest",
    "ContextManager",
    "register_context_strategy",
    "resolve_strategy",
]
