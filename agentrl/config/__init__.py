"""Typed configuration: schema, recipe loading and dotted overrides, and `validate_run` (every name resolved)."""

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
from agentrl.config.validate import validate_run

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
    "validate_run",
]
