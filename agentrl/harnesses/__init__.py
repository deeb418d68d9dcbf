"""Agent harnesses run unchanged inside a task's container against a gateway session: Claude Code (Anthropic's
Messages API) and Codex CLI (OpenAI's Responses API). See docs/guides/harnesses.md."""

from agentrl.harnesses.spec import Harness

__all__ = ["Harness"]
