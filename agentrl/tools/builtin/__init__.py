"""Built-in sandboxed tools: `bash`, `python`, `editor`, `submit`.

They run in the trajectory's sandbox (`ctx.sandbox`) and answer with a clear error when none is configured.
Importing this package registers them by dotted path; their modules are imported only when a tool is built.
"""

from agentrl.tools.registry import register_tool_path

BUILTIN_TOOLS = {
    "bash": "agentrl.tools.builtin.shell:BashTool",
    "python": "agentrl.tools.builtin.shell:PythonTool",
    "editor": "agentrl.tools.builtin.editor:EditorTool",
    "submit": "agentrl.tools.builtin.submit:SubmitTool",
}

for _name, _path in BUILTIN_TOOLS.items():
    register_tool_path(_name, _path)

__all__ = ["BUILTIN_TOOLS"]
