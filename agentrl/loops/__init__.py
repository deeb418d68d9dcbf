"""Agent loops: subclass `AgentLoopBase`, register it, and the `RolloutManager` runs it concurrently.

Modules: `base` (AgentLoopBase, LoopOptions, the LOOPS registry), `context` (what a loop sees: AgentContext,
Budgets, StopLoop), `protocols` (the token generator and tokenizer a loop relies on), `builder` / `drift` /
`chat_template` (exact token trajectories), `reasoning_template` (a Qwen3-style template that rewrites
history), `manager` (RolloutManager), `session` (a manager from a run's config),
`tool_turns` / `tool_setup` / `sandbox_setup` (tools and sandboxes per trajectory), `conformance` (`check_loop`: the
loop contract, checked the same way for every loop), and the built-in loops, imported
only when named: `single_turn`, `tool_calling` (tool_agent), `swe` (swe_agent), `harbor` (harbor_agent,
harbor_oracle), `gui` (gui_agent), `gym`.
"""

from agentrl.loops.base import LOOPS, AgentLoopBase, LoopOptions, get_loop_class, register_loop
from agentrl.loops.conformance.case import LoopCheckCase
from agentrl.loops.conformance.check import LoopContractError, check_loop
from agentrl.loops.context import AgentContext, Budgets, StopLoop, Turn
from agentrl.loops.interaction import Interaction
from agentrl.loops.manager import RolloutManager

__all__ = [
    "LOOPS",
    "AgentContext",
    "AgentLoopBase",
    "Budgets",
    "Interaction",
    "LoopCheckCase",
    "LoopContractError",
    "LoopOptions",
    "RolloutManager",
    "StopLoop",
    "Turn",
    "check_loop",
    "get_loop_class",
    "register_loop",
]
