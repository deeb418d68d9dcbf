"""Assistant turns the model did not generate, written as it would have: a message's tool calls in the template's
own format or the tool parser's (`rendered_message`), and the tokens of the whole turn (`assistant_turn_ids`).
The gateway renders an agent's history this way, its upstream mode records a teacher's replies this way, and
supervised fine-tuning renders chat rows this way (`agentrl.trainer.demonstrations`)."""

from __future__ import annotations

from typing import Any

from agentrl.gateway.messages import to_message
from agentrl.gateway.validation import call_arguments
from agentrl.loops.chat_template import encode, render
from agentrl.tools.base import ToolCall
from agentrl.tools.parsers import ToolCallParser
from agentrl.tools.prompt import template_renders_tool_calls
from agentrl.types import Message

END_OF_TURN = ("<|im_end|>", "<|eot_id|>", "<|end|>", "<|endoftext|>")
"""End-of-turn tokens the templates close an assistant turn with: the model generates up to and including one."""


class TemplateRewriteError(ValueError):
    """The chat template does not render the conversation with an assistant turn added as an extension of it."""


def rendered_message(message: dict[str, Any], tokenizer: Any, parser: ToolCallParser) -> Message:
    """A chat message the model did not generate, as the chat template should see it: its tool calls go to the
    template when it writes calls itself; otherwise they are written after the content in the parser's format, the
    text the model is trained to emit (so that the parser reads them back)."""
    out = to_message(message)
    calls = [tool_call(call) for call in out.tool_calls or []]
    if not calls:
        return out.model_copy(update={"tool_calls": None})
    if template_renders_tool_calls(tokenizer):
        return out.model_copy(update={"tool_calls": [call.to_dict() for call in calls]})
    text = "\n".join(t for t in (str(out.content or "").strip(), parser.format_calls(calls)) if t)
    return out.model_copy(update={"content": text, "tool_calls": None})


def tool_call(call: dict[str, Any]) -> ToolCall:
    """An OpenAI tool call (arguments as a JSON string or an object) as a `ToolCall`."""
    function = call.get("function", call)
    return ToolCall(id=str(call.get("id") or ""), name=function["name"], arguments=call_arguments(function))


def assistant_turn_ids(
    tokenizer: Any, so_far: list[Message], message: Message, tools: list[dict[str, Any]] | None = None
) -> list[int]:
    """The tokens the model writes for `message` after the conversation `so_far` (rendered with the generation
    prompt): the template's text for the turn, up to and including its end-of-turn token.

    Raises:
        TemplateRewriteError: the template renders the longer conversation so that it does not extend the shorter.
    """
    before = render(tokenizer, so_far, add_generation_prompt=True, tools=tools)
    after = render(tokenizer, [*so_far, message], add_generation_prompt=False, tools=tools)
    if not after.startswith(before):
        raise TemplateRewriteError("the chat template rewrites the conversation when an assistant turn is added")
    text = after[len(before) :]
    ends = [(text.find(end), end) for end in END_OF_TURN if end in text]
    if ends:
        at, end = min(ends)
        text = text[: at + len(end)]
    return encode(tokenizer, text)
