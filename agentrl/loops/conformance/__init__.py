"""The loop contract, checked the same way for every agent loop: `check_loop` (see `agentrl.loops.conformance.check`).

Only `case` is imported here: `AgentLoopBase` names `LoopCheckCase`; import `check_loop` from `agentrl.loops`.
"""

from agentrl.loops.conformance.case import NEEDS, LoopCheckCase

__all__ = ["NEEDS", "LoopCheckCase"]
