"""The error taxonomy: what went wrong, and so how the CLI and the rollout manager treat it.

    AgentRLError                 every error agentrl raises on purpose
    ├── UserError                 config, data, missing model or image, bad extension code: the user's to fix.
    │                             The CLI prints the message only (no traceback) and exits with status 2.
    └── InfrastructureError      a rollout server, sandbox, browser, weight sync or trainer backend failed.
                                  The CLI keeps the traceback and exits with status 1; the trainer saves the run's
                                  state first. A trajectory it ends is saved and counted but never trained on.

Classify by type, never by class-name strings: subclass the right one.
"""


class AgentRLError(Exception):
    """Base of every error agentrl raises on purpose. Raise a `UserError` or an `InfrastructureError`."""


class UserError(AgentRLError):
    """Caused by user input (config, data, environment, extension code); the message says the fix."""


class InfrastructureError(AgentRLError):
    """Something the run depends on failed (server, sandbox, browser, weight sync, trainer backend)."""


class ModelNotFoundError(UserError):
    """A model spec names no usable model here: default not prepared, not a model folder, or not cached."""


class ForkUnsupportedError(UserError):
    """A sandbox, environment or loop that cannot be forked; the message names it and says what to do instead."""


class TooManyFailuresError(InfrastructureError):
    """More of a step's trajectories failed for infrastructure reasons than `trainer.max_failed_fraction`."""


def exit_status(exc: BaseException) -> int:
    """The CLI exit status for `exc`: 2 for user errors, 1 for everything else."""
    return 1 if isinstance(exc, InfrastructureError) or not isinstance(exc, AgentRLError) else 2
