"""The configuration's error: every problem of a config, listed at once."""

from __future__ import annotations

from agentrl.errors import UserError


class ConfigError(UserError):
    """The configuration is invalid; `problems` lists every problem found."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        body = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"invalid configuration ({len(problems)} problem(s)):\n{body}")
