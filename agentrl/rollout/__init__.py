"""Rollout serving: the token-in/token-out client, the replica router, and the wire protocol."""

from agentrl.rollout.client import LLMClient
from agentrl.rollout.completions import TokenOutput
from agentrl.rollout.errors import (
    NoHealthyReplicaError,
    ProtocolError,
    RolloutError,
    ServerRequestError,
    ServerUnavailableError,
)
from agentrl.rollout.protocol import SamplingParams
from agentrl.rollout.router import Router

__all__ = [
    "LLMClient",
    "NoHealthyReplicaError",
    "ProtocolError",
    "RolloutError",
    "Router",
    "SamplingParams",
    "ServerRequestError",
    "ServerUnavailableError",
    "TokenOutput",
]
