"""A verifiers `Client` whose replies are generated token-in/token-out into an agentrl trajectory.

A verifiers environment asks its client for the next assistant message given the whole conversation (`prompt`).
This client renders only what is new since its last reply (the environment's tool results, user turns) as the
chat template's exact token suffix, generates the turn on the run's rollout servers (`AgentContext.generate`), and
answers with the reply as verifiers' `Response`, its tool calls parsed by the run's tool parser. An environment
that rewrites the conversation (anything but an extension of it) starts a new step sample, as the gateway does.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from typing import Any

from verifiers.clients.client import Client
from verifiers.errors import OverlongPromptError
from verifiers.types import Response, ResponseMessage, Usage
from verifiers.types import ToolCall as VfToolCall

from agentrl.loops.context import AgentContext, StopLoop
from agentrl.loops.tool_setup import offer_tools
from agentrl.tools.parsers import ToolCallParser
from agentrl.tools.prompt import tools_system_prompt
from agentrl.types import Message


class TurnClient(Client):
    """Serves one trajectory's turns (one client per rollout: it remembers what it has rendered)."""

    def __init__(self, ctx: AgentContext, parser: ToolCallParser, policy: str | None = None):
        super().__init__(ctx)
        self.ctx = ctx
        self.parser = parser
        self.policy = policy
        self.rendered: list[Message] = []  # the conversation so far, as rendered (our replies included)
        self.stopped: StopLoop | None = None  # the budget that ended the rollout, raised after it is scored

    def setup_client(self, config: Any) -> Any:
        raise NotImplementedError("TurnClient is built from an AgentContext, not a ClientConfig")

    async def to_native_tool(self, tool: Any) -> dict[str, Any]:
        function = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
        return {"type": "function", "function": function}

    async def to_native_prompt(self, messages: Any) -> tuple[list[Message], dict]:
        return [to_message(m) for m in messages], {}

    async def get_native_response(
        self, prompt: list[Message], model: str, sampling_args: Any, tools: Any = None, **kwargs: Any
    ) -> Response:
        try:
            self._render(prompt, tools or [])
            turn = await self.ctx.generate(policy=self.policy, continue_if_cut=True)
        except StopLoop as stop:  # a budget of ours: the rollout ends as verifiers ends an overlong one
            self.stopped = stop
            raise OverlongPromptError(f"agentrl budget: {stop.reason.value}") from stop
        self.rendered.append(self.ctx.trajectory.messages[-1])
        return self._response(turn.text, turn.finish_reason, len(turn.token_ids), model)

    async def raise_from_native_response(self, response: Response) -> None:
        return None

    async def from_native_response(self, response: Response) -> Response:
        return response

    async def close(self) -> None:
        return None

    def _render(self, prompt: list[Message], tools: list[dict[str, Any]]) -> None:
        known = len(self.rendered)
        if not self.rendered:
            offer_tools(self.ctx, tools, tools_system_prompt(self.ctx.tokenizer, tools, self.parser))
            self.ctx.start(prompt)
        elif len(prompt) > known and same_messages(prompt[: known - 1], self.rendered[: known - 1]):
            self.ctx.add_messages(prompt[known:])
        else:  # the environment rewrote the conversation: its rendering is the next turn's real prompt
            self.ctx.new_step_sample(prompt)
        self.rendered = list(prompt)

    def _response(self, text: str, finish_reason: str, completion_tokens: int, model: str) -> Response:
        parsed = self.parser.parse(text)
        calls = [VfToolCall(id=c.id, name=c.name, arguments=json.dumps(c.arguments)) for c in parsed.calls]
        cut = finish_reason == "length"
        message = ResponseMessage(
            content=parsed.content if calls else text,
            tool_calls=calls or None,
            finish_reason="length" if cut else ("tool_calls" if calls else "stop"),
            is_truncated=cut,
        )
        prompt_tokens = self.ctx.builder.num_tokens - completion_tokens
        usage = Usage(
            prompt_tokens=prompt_tokens,
            reasoning_tokens=0,
            completion_tokens=completion_tokens,
            total_tokens=prompt_tokens + completion_tokens,
        )
        return Response(id=uuid.uuid4().hex, created=int(time.time()), model=model, usage=usage, message=message)


def to_message(message: Any) -> Message:
    """A verifiers message (pydantic model or dict) as an agentrl `Message` (tool calls in OpenAI shape)."""
    data = message if isinstance(message, dict) else message.model_dump(exclude_none=True)
    calls = data.get("tool_calls")
    if calls:
        data = {**data, "tool_calls": [_openai_call(c) for c in calls]}
    keep = ("role", "content", "name", "tool_calls", "tool_call_id")
    return Message(**{k: v for k, v in data.items() if k in keep and v is not None})


def _openai_call(call: dict[str, Any]) -> dict[str, Any]:
    if "function" in call:
        return call
    arguments = call.get("arguments", "{}")
    with contextlib.suppress(json.JSONDecodeError):  # else kept as the text the model wrote
        arguments = json.loads(arguments) if isinstance(arguments, str) else arguments
    return {"id": call.get("id"), "type": "function", "function": {"name": call.get("name"), "arguments": arguments}}


def same_messages(a: list[Message], b: list[Message]) -> bool:
    """Whether two conversations say the same (roles and contents; ids and formatting aside)."""
    return len(a) == len(b) and all(x.role == y.role and x.content == y.content for x, y in zip(a, b, strict=True))


__all__ = ["TurnClient", "same_messages", "to_message"]
