"""Tool-call parsers: read tool calls out of generated text, one class per model family's format.

Built in (imported when first named): `hermes` (Qwen, Hermes: `<tool_call>{json}</tool_call>`, in `hermes`) and
`llama3_json` (Llama 3.x JSON, in `llama3_json`). `registry` holds `PARSERS` and `register_parser`.
"""

from agentrl.tools.parsers.base import ParsedOutput, ToolCallParser
from agentrl.tools.parsers.registry import PARSERS, get_parser, register_parser

__all__ = ["PARSERS", "ParsedOutput", "ToolCallParser", "get_parser", "register_parser"]
