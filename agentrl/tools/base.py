"""The tool contract: a call parsed from model output, its result, and the `Tool` base class.

A `Tool` instance may be shared by many trajectories at once; whatever belongs to one trajectory lives in the
`ToolContext` it is handed (`ctx.state`), which `ToolSet` creates per trajectory and per tool.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel, ValidationError

from agentrl.errors import UserError
from agentrl.types import Message


@dataclass
class ToolCall:
    """One tool call parsed from model output.

    Attributes:
        id: call id; parsers generate `call_<i>` when the format carries none.
        name: the tool the model asked for.
        arguments: the decoded JSON arguments.
        raw: the exact text of the call in the model output.
    """

    id: str
    name: str
    arguments: dict[str, Any]
    raw: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The call as an entry of an assistant message's `tool_calls` (arguments as a dict, as HF templates
        expect; `json.dumps` them for the OpenAI wire format)."""
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass
class ToolResult:
    """The outcome of one tool call, as the model will read it.

    Attributes:
        call_id: id of the `ToolCall` this answers.
        name: the tool's name.
        content: the text the model reads, already capped in tokens.
        is_error: the call failed (unknown tool, bad arguments, exception, timeout, parse error).
        timed_out: the call ran past its timeout.
        truncated: the content was cut to the token cap.
        duration_s: wall-clock time of the call.
        metadata: free-form extras a tool wants to pass to its agent loop (e.g. `{"submitted": True}`).
    """

    call_id: str
    name: str
    content: str
    is_error: bool = False
    timed_out: bool = False
    truncated: bool = False
    duration_s: float = 0.0
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_message(self) -> Message:
        """The result as a `tool` chat message."""
        return Message(role="tool", content=self.content, name=self.name or None, tool_call_id=self.call_id or None)


@dataclass
class ToolContext:
    """What a tool sees of the trajectory it serves.

    Attributes:
        trajectory_id: id of the trajectory.
        sandbox: the trajectory's sandbox lease, or None when no sandbox is configured.
        state: this tool's private per-trajectory state (fresh for every trajectory).
        shared: state shared by all tools of the trajectory (e.g. an editor and a submit tool).
    """

    trajectory_id: str
    sandbox: Any = None
    state: dict[str, Any] = field(default_factory=dict)
    shared: dict[str, Any] = field(default_factory=dict)


class Tool(ABC):
    """Base of class tools, whose lifecycle is bound to a trajectory.

    Subclasses set `name`, `description` and `parameters` (a JSON schema of the arguments, an "object") and
    implement `execute`. `create` runs on the first call within a trajectory and `release` when the trajectory
    ends; keep per-trajectory state in `ctx.state`, since one instance may serve many trajectories at once.
    Set `config_model` to a pydantic model to have the YAML `config:` validated when the tool is built.

    Example:
        ```python
        @register_tool("counter")
        class Counter(Tool):
            name = "count"
            description = "Increment a counter and return its value."
            parameters = {"type": "object", "properties": {}}

            async def execute(self, arguments, ctx):
                ctx.state["n"] = ctx.state.get("n", 0) + 1
                return str(ctx.state["n"])
        ```
    """

    name: str = ""
    description: str = ""
    parameters: dict[str, Any] = {"type": "object", "properties": {}}
    timeout_s: float | None = None
    """Per-call timeout of this tool; None uses the `ToolSet` default."""
    config_model: ClassVar[type[BaseModel] | None] = None
    """Optional pydantic model validating `config`; the validated instance is `self.cfg`."""

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        self.config: dict[str, Any] = dict(config or {})
        self.cfg: BaseModel | None = None
        if self.config_model is not None:
            try:
                self.cfg = self.config_model.model_validate(self.config)
            except ValidationError as exc:
                raise UserError(f"invalid config of tool '{self.name}': {exc}") from exc
        if not self.name:
            raise UserError(f"tool class {type(self).__name__} must set a `name`")

    async def create(self, ctx: ToolContext) -> None:  # noqa: B027 - optional hook
        """Prepare the tool for one trajectory; called before its first call there."""

    @abstractmethod
    async def execute(self, arguments: dict[str, Any], ctx: ToolContext) -> str | ToolResult:
        """Run one call with validated `arguments`; return the text for the model or a full `ToolResult`.

        Raise to report a failure: the exception's message goes back to the model as an error result.
        """

    async def release(self, ctx: ToolContext) -> None:  # noqa: B027 - optional hook
        """Free what `create` acquired; called once when the trajectory ends, even after errors."""

    def schema(self) -> dict[str, Any]:
        """The tool in the OpenAI function-tool format, as chat templates take it."""
        function = {"name": self.name, "description": self.description, "parameters": self.parameters}
        return {"type": "function", "function": function}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"
