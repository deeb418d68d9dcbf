"""Gymnasium environments as agent tasks: text adapters, a checker, and seed-generated datasets.

Any `gymnasium.Env` plays through an `EnvAdapter` (observation → text, reply → action); the `gym` agent loop
(`agentrl.loops.gym.GymAgentLoop`) runs one episode per trajectory. `check_env` verifies that an env and its
adapter round-trip before you train on it.
"""

from agentrl.envs.adapter import BUILTIN_ADAPTERS, EnvAdapter, adapter_class
from agentrl.envs.check import EnvCheckError, EnvCheckReport, check_env
from agentrl.envs.dataset import seed_samples
from agentrl.envs.factory import env_name, make_env
from agentrl.envs.gym import GymEpisode, StepOutcome
from agentrl.envs.observations import format_observation, strip_ansi
from agentrl.envs.spaces import ActionCodec, InvalidAction, codec_for

__all__ = [
    "BUILTIN_ADAPTERS",
    "ActionCodec",
    "EnvAdapter",
    "EnvCheckError",
    "EnvCheckReport",
    "GymEpisode",
    "InvalidAction",
    "StepOutcome",
    "adapter_class",
    "check_env",
    "codec_for",
    "env_name",
    "format_observation",
    "make_env",
    "seed_samples",
    "strip_ansi",
]
