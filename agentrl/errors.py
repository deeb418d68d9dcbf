"""User-facing errors. The CLI prints their message, without a traceback, and exits with status 2."""


class AgentRLError(Exception):
    """Base of every error caused by user input (config, data, environment), with a message saying the fix."""


class ModelNotFoundError(AgentRLError):
    """A model spec names no usable model here: default not prepared, not a model folder, or not cached."""
