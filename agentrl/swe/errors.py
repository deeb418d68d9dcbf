"""The SWE package's error: a task row that cannot be used."""

from __future__ import annotations

from agentrl.errors import UserError


class TaskError(UserError):
    """A SWE task row is unusable; the message names the row and the field."""
