"""Attach a per-trajectory `ToolSet` to each loop context, and release it when the trajectory ends."""

from __future__ import annotations

from typing import Any

from agentrl.config.schema import AgentConfig
from agentrl.loops.context import AgentContext
from agentrl.tools.base import Tool
from agentrl.tools.parsers import get_parser
from agentrl.tools.prompt import tools_system_prompt
from agentrl.tools.toolset import ToolSet


def offer_tools(ctx: AgentContext, schemas: list[dict[str, Any]], instructions: str | None) -> None:
    """Tell the model about the tools before the prompt is rendered: the schemas through the chat template's tools
    slot when `instructions` is None (`tools_system_prompt` says so), else the instructions in the system prompt."""
    if instructions is None:
        ctx.tool_schemas = schemas or None
        ctx.builder.tools = schemas or None
    else:
        ctx.system_prompt = "\n\n".join(p for p in (ctx.system_prompt, instructions) if p)


class ToolHooks:
    """`setup_context` / `teardown_context` hooks of the RolloutManager for tool-using loops.

    The tool schemas go to the chat template when it has a tools slot; otherwise the parser's instructions are
    merged into the system prompt (SmolLM2's template, for one, has no tools slot).
    """

    def __init__(
        self,
        tools: list[Tool],
        agent: AgentConfig,
        tokenizer: Any,
        timeout_s: float = 30.0,
        max_output_tokens: int = 1024,
    ):
        self.tools = tools
        self.agent = agent
        self.tokenizer = tokenizer
        self.timeout_s = timeout_s
        self.max_output_tokens = max_output_tokens
        self.schemas = [t.schema() for t in tools]
        self.instructions = tools_system_prompt(tokenizer, self.schemas, get_parser(agent.tool_parser))

    def setup(self, ctx: AgentContext) -> None:
        ctx.tools = ToolSet(
            self.tools,
            trajectory_id=ctx.trajectory.id,
            sandbox=ctx.sandbox,
            timeout_s=self.timeout_s,
            max_output_tokens=self.max_output_tokens,
            count_tokens=self._count,
            truncate_tokens=self._truncate,
            max_consecutive_errors=self.agent.max_consecutive_tool_errors,
        )
        offer_tools(ctx, self.schemas, self.instructions)

    async def teardown(self, ctx: AgentContext) -> None:
        if ctx.tools is not None:
            await ctx.tools.release()

    def _count(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def _truncate(self, text: str, max_tokens: int) -> str:
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        return self.tokenizer.decode(ids[:max_tokens])
