"""Agent loops: subclass `AgentLoopBase`, register it, and the `RolloutManager` runs it concurrently."""

from agentrl.loops.base import AgentLoopBase, get_loop_class, known_loops, register_loop
from agentrl.loops.context import AgentContext, Budgets, StopLoop, Turn
from agentrl.loops.gym import GymAgentLoop as GymAgentLoop  # registers the `gym` loop
from agentrl.loops.interaction import Interaction
from agentrl.loops.manager import RolloutManager

__all__ = [
    "AgentContext",
    "AgentLoopBase",
    "Budgets",
    "Interaction",
    "RolloutManager",
    "StopLoop",
    "Turn",
    "get_loop_class",
    "known_loops",
    "register_loop",
]
from agentrl.loops import gui as _gui  # noqa: F401  registers the gui_agent loop
from agentrl.loops import swe as _swe  # noqa: F401  registers the swe_agent loop
