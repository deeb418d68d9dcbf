"""Tool-call parsers: read tool calls out of generated text, one class per model family's format.

Built in: `hermes` (Qwen, Hermes: `<tool_call>{json}</tool_call>`) and `llama3_json` (Llama 3.x JSON).
"""

from agentrl.tools.parsers.base import ParsedOutput, ToolCallParser
from agentrl.tools.parsers.hermes import HermesParser
from agentrl.tools.parsers.llama3_json import Llama3JsonParser
from agentrl.tools.parsers.registry import get_parser, register_parser, registered_parsers

__all__ = [
    "HermesParser",
    "Llama3JsonParser",
    "ParsedOutput",
    "ToolCallParser",
    "get_parser",
    "register_parser",
    "registered_parsers",
]
