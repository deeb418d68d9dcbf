"""The lookup recipes' tool (tool_choice, tool_pick) called as a run calls it, and episodes written with it, for
unit tests of their data and rewards."""

from __future__ import annotations

import asyncio
import re

from agentrl.config import load_config
from agentrl.tools.base import ToolCall
from agentrl.tools.registry import build_tools
from agentrl.tools.toolset import ToolSet
from agentrl.types import Message, Trajectory


def lookup(recipe: str, key: str) -> str:
    """What the recipe's `lookup` tool returns for `key` (its error message for a bad key)."""
    tools = ToolSet(build_tools(load_config(recipe).tools), trajectory_id="t")
    return asyncio.run(tools.execute(ToolCall(id="call_0", name="lookup", arguments={"key": key}))).content


def call(key: str) -> str:
    """An assistant turn that calls `lookup` in the hermes format."""
    return f'<tool_call>\n{{"name": "lookup", "arguments": {{"key": "{key}"}}}}\n</tool_call>'


def episode(recipe: str, *turns: str) -> Trajectory:
    """Assistant turns; a turn that calls lookup is followed by the recipe's tool's real result."""
    messages = [Message(role="user", content="q")]
    for turn in turns:
        messages.append(Message(role="assistant", content=turn))
        called = re.search(r'"key": "(\w+)"', turn)
        if called:
            messages.append(Message(role="tool", name="lookup", content=lookup(recipe, called[1]), tool_call_id="c"))
    return Trajectory(messages=messages)
