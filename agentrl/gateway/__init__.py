"""The OpenAI-compatible gateway: train and evaluate agents that only know an OpenAI endpoint, token-exactly."""

from agentrl.gateway.recorder import CallRecord, Reply, SessionRecorder
from agentrl.gateway.server import Gateway
from agentrl.gateway.session import BudgetExceeded, GatewaySession, SessionClosed, SessionLimits

__all__ = [
    "BudgetExceeded",
    "CallRecord",
    "Gateway",
    "GatewaySession",
    "Reply",
    "SessionClosed",
    "SessionLimits",
    "SessionRecorder",
]
