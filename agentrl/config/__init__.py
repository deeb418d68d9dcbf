"""Typed configuration: schema, recipe loading and dotted overrides (names are resolved by the preflights above)."""

from agentrl.config.loader import ConfigError, available_recipes, find_recipe, load_config, validate
from agentrl.config.schema import (
    AgentConfig,
    AgentRLConfig,
    DataConfig,
    EnvConfig,
    EnvExample,
    RewardConfig,
    RolloutConfig,
    SandboxConfig,
    ToolSpec,
    TrainerConfig,
)

__all__ = [
    "AgentConfig",
    "AgentRLConfig",
    "ConfigError",
    "DataConfig",
    "EnvConfig",
    "EnvExample",
    "RewardConfig",
    "RolloutConfig",
    "SandboxConfig",
    "ToolSpec",
    "TrainerConfig",
    "available_recipes",
    "find_recipe",
    "load_config",
    "validate",
]
