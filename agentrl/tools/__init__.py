"""Tools an agent can call: the `Tool` contract, `@tool`, the registry, per-trajectory `ToolSet`, parsers.

```python
from agentrl.tools import ToolSet, build_tools, get_parser, tool

@tool
def add(a: int, b: int) -> int:
    \"\"\"Add two integers.\"\"\"
    return a + b

tools = ToolSet([add], trajectory_id="t0", timeout_s=10)
parsed = get_parser("hermes").parse(model_text)
results = [await tools.execute(call) for call in parsed.calls]
await tools.release()
```
"""

from agentrl.tools.base import Tool, ToolCall, ToolContext, ToolResult
from agentrl.tools.decorator import FunctionTool, tool
from agentrl.tools.parsers import PARSERS, ParsedOutput, ToolCallParser, get_parser, register_parser
from agentrl.tools.prompt import add_tool_instructions, template_has_tools_slot, tools_system_prompt
from agentrl.tools.registry import TOOLS, build_tools, get_tool_class, register_tool
from agentrl.tools.toolset import ToolSet

__all__ = [
    "PARSERS",
    "TOOLS",
    "FunctionTool",
    "ParsedOutput",
    "Tool",
    "ToolCall",
    "ToolCallParser",
    "ToolContext",
    "ToolResult",
    "ToolSet",
    "add_tool_instructions",
    "build_tools",
    "get_parser",
    "get_tool_class",
    "register_parser",
    "register_tool",
    "template_has_tools_slot",
    "tool",
    "tools_system_prompt",
]
