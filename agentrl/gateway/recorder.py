"""What one gateway session generated, as token-exact step samples.

Each chat call either extends the conversation recorded so far (its messages start with the previous call's
messages and the reply the gateway gave) or rewrites it (compaction, truncation, an edited message). An extension
reuses the recorded tokens verbatim and appends only the chat template's suffix for the new messages, so a whole
agent run stays one trajectory whose only trainable tokens are the generated ones. A rewrite starts a new *step
sample*: a trajectory of its own, rendered from the request's messages (earlier replies in it rendered from the
text the model generated, when the gateway recognises them), token-exact and trainable on its own generation.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agentrl.gateway.messages import MessageKey, assistant_message, message_key, to_message
from agentrl.gateway.turns import END_OF_TURN, assistant_turn_ids, rendered_message
from agentrl.loops.builder import TemplateBoundaryError, TrajectoryBuilder
from agentrl.loops.protocols import Generation, Tokenizer
from agentrl.tools.parsers import ToolCallParser
from agentrl.tools.prompt import add_tool_instructions, template_has_tools_slot
from agentrl.types import Message, Trajectory


@dataclass
class CallRecord:
    """One chat call through the gateway.

    Attributes:
        num_messages: how many messages the request had.
        prompt_tokens: the length of the prompt the policy saw (the step sample's first `prompt_tokens` tokens;
            only lengths are kept, so a long session's records stay linear in its length).
        output_ids: the generated tokens, as the server returned them.
        logprobs: their logprobs.
        policy_version: the weights that generated them.
        finish_reason: `stop`, `length` or `tool_calls` (None: the call failed before generating).
        step: the step sample it belongs to.
        prefix_matched: the request extended the recorded conversation (its earlier tokens were reused).
        answered: (segments, messages) of its step sample once its reply was recorded (None: unanswered): what a
            later call that was refused or failed leaves of the step sample it extended.
    """

    num_messages: int
    prompt_tokens: int
    output_ids: list[int] = field(default_factory=list)
    logprobs: list[float] | None = None
    policy_version: int | None = None
    finish_reason: str | None = None
    step: int = 0
    prefix_matched: bool = False
    answered: tuple[int, int] | None = None


@dataclass
class Reply:
    """What the agent gets back from one call."""

    message: dict[str, Any]
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    text: str = ""
    """The generated text as the model wrote it (tool calls and all, a stop sequence that ended it included)."""
    stop_sequence: str | None = None
    """The stop sequence that ended the reply (its message holds the text before it), if one did."""

    def usage(self) -> dict[str, int]:
        """OpenAI's `usage` object."""
        total = self.prompt_tokens + self.completion_tokens
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens, "total_tokens": total}


class SessionRecorder:
    """Turns a session's chat calls into step samples (`steps`), one per unbroken conversation.

    Args:
        tokenizer: the policy's tokenizer (its chat template renders the prompts).
        parser: reads tool calls out of replies (the run's `agent.tool_parser`).
        trajectory_id: id of the first step sample (later ones get `<id>-step<k>`).
    """

    def __init__(self, tokenizer: Tokenizer, parser: ToolCallParser, trajectory_id: str = "") -> None:
        self.tokenizer, self.parser = tokenizer, parser
        self.trajectory_id = trajectory_id
        self.steps: list[Trajectory] = []
        self.calls: list[CallRecord] = []
        self.template_rewrites = 0  # calls that extended the conversation but that the template rendered anew
        self._builder: TrajectoryBuilder | None = None
        self._view: list[MessageKey] = []
        self._tools_key = ""
        self._raw_replies: dict[MessageKey, str] = {}

    @property
    def prefix_reuse_rate(self) -> float:
        """Share of calls after the first whose history extended the recorded one (1.0 with fewer than 2 calls)."""
        later = self.calls[1:]
        return sum(c.prefix_matched for c in later) / len(later) if later else 1.0

    @property
    def generated_steps(self) -> list[Trajectory]:
        """The step samples holding a generation: the ones to train on (a step sample whose only call was refused
        or failed holds nothing but a prompt), each ending with its last reply: the prompt of a later call that was
        refused (over the token budget) or failed is no part of what the policy saw and answered."""
        answered = {c.step: c.answered for c in self.calls if c.answered is not None}  # each step's last answer
        return [_cut(step, answered[index]) for index, step in enumerate(self.steps) if index in answered]

    @property
    def num_tokens(self) -> int:
        """Tokens of the current step sample."""
        return self._builder.num_tokens if self._builder else 0

    def prompt(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> list[int]:
        """The prompt ids for a chat call: the recorded tokens plus the new messages' suffix when the request
        extends the recorded conversation, else a new step sample's rendering. Records the call."""
        if not messages:
            raise ValueError("messages must not be empty")
        keys = [message_key(m) for m in messages]
        tools_key = json.dumps(tools or [], sort_keys=True)
        extends = (
            self._builder is not None
            and tools_key == self._tools_key
            and len(keys) > len(self._view)
            and keys[: len(self._view)] == self._view
        )
        failed_before = bool(self.calls) and not self.calls[-1].output_ids
        if failed_before and keys == self._view and tools_key == self._tools_key:
            extends = self.calls[-1].prefix_matched  # an exact retry of a call that failed: its prompt stands
        elif failed_before:  # the recorded prompt ends in the failed call's generation prompt: start over
            extends = False
            self._start_step(messages, tools)
        elif extends:
            extends = self._extend([self._foreign(m) for m in messages[len(self._view) :]])
            if not extends:  # the template rewrote history (e.g. dropped earlier <think> blocks)
                self.template_rewrites += 1
                self._start_step(messages, tools)
        else:
            self._start_step(messages, tools)
        assert self._builder is not None
        self._view, self._tools_key = keys, tools_key
        prompt_ids = list(self._builder.trajectory.token_ids)
        step = len(self.steps) - 1
        self.calls.append(CallRecord(len(messages), len(prompt_ids), step=step, prefix_matched=extends))
        return prompt_ids

    def turn_ids(self, message: dict[str, Any], complete: bool = True) -> list[int]:
        """The tokens of an assistant reply the policy did not generate (an upstream teacher's: content and tool
        calls) as the policy would have written it after the conversation the last `prompt` call recorded; its
        end-of-turn token left off unless `complete` (a reply cut at its length)."""
        assert self._builder is not None, "prompt() comes first"
        builder = self._builder
        rendered = rendered_message({**message, "role": "assistant"}, self.tokenizer, self.parser)
        ids = assistant_turn_ids(self.tokenizer, builder.trajectory.messages, rendered, builder.tools)
        if not complete and ids and self.tokenizer.decode(ids[-1:]) in END_OF_TURN:
            ids = ids[:-1]
        return ids

    def record(
        self,
        pieces: list[tuple[list[int], list[float] | None, int | None]],
        finish_reason: str,
        parse_tool_calls: bool = True,
        temperature: float | None = None,
        policy: str | None = None,
        trainable: bool = True,
        stop: list[str] | None = None,
    ) -> Reply:
        """Append the generation of the last `prompt` call (in pieces, when weight pushes interrupted it) and
        build the reply: its text, and the tool calls parsed from it when `parse_tool_calls` (the request
        offered tools and did not say `tool_choice: none`). A generation a weight push cut short answers
        `length`, the OpenAI reason for a reply that stopped before it was done. `temperature`: the one it was
        sampled at (the trainer computes its logprobs at the same). `policy`: the policy that generated it, with
        several; `trainable=False`: a frozen policy's reply. `stop`: the stop sequences it was sampled with: the
        reply holds the text before the one that ended it, as Anthropic and OpenAI return it, while the recording
        keeps the tokens that completed it (the generation, token-exact)."""
        assert self._builder is not None, "prompt() comes first"
        call = self.calls[-1]
        raw = self._builder.add_generation_pieces(pieces, temperature, policy, trainable)
        call.output_ids = [t for ids, _, _ in pieces for t in ids]
        logprobs = [lp for _, lps, _ in pieces for lp in (lps or [])]
        call.logprobs = logprobs if len(logprobs) == len(call.output_ids) else None
        call.policy_version = pieces[-1][2]
        self._builder.trajectory.num_turns += 1
        if call.output_ids:
            call.answered = (len(self._builder.trajectory.segments), len(self._builder.trajectory.messages))
        shown, sequence = before_stop(raw, stop) if finish_reason == "stop" else (raw, None)
        parsed = self.parser.parse(shown) if parse_tool_calls else None
        calls = [
            type(c)(id=f"call_{len(self.calls) - 1}_{i}", name=c.name, arguments=c.arguments, raw=c.raw)
            for i, c in enumerate(parsed.calls if parsed else [])
        ]
        reason = "length" if finish_reason == "abort" else finish_reason
        reason = "tool_calls" if calls and reason == "stop" else reason
        call.finish_reason = reason
        message = assistant_message(parsed.content if parsed and calls else shown, calls)
        key = message_key(message)
        self._view.append(key)
        self._raw_replies[key] = raw  # a rewritten history renders it from the model's own text
        return Reply(message, reason, call.prompt_tokens, len(call.output_ids), raw, sequence)

    def _extend(self, new: list[Message]) -> bool:
        assert self._builder is not None
        try:
            self._builder.add_messages(new, add_generation_prompt=True)
        except TemplateBoundaryError:
            return False
        return True

    def count_tokens(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> int:
        """The tokens of `messages` and `tools` rendered as a new step sample's prompt (nothing is recorded)."""
        return self._render(messages, tools, Trajectory(id="count")).num_tokens

    def _start_step(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> None:
        if self.steps and not any(c.output_ids for c in self.calls if c.step == len(self.steps) - 1):
            self.steps.pop()  # the current step sample only holds a failed call's prompt: nothing to train on
        index = len(self.steps)
        trajectory = Trajectory(id=self.trajectory_id if index == 0 else f"{self.trajectory_id}-step{index}")
        trajectory.metadata["gateway_step"] = index
        self._builder = self._render(messages, tools, trajectory)
        self.steps.append(trajectory)

    def _render(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, trajectory: Trajectory
    ) -> TrajectoryBuilder:
        rendered = [self._as_rendered(m) for m in messages]
        schemas = tools or None
        if schemas and not template_has_tools_slot(self.tokenizer):
            rendered = add_tool_instructions(rendered, self.parser.format_instructions(schemas))
            schemas = None
        builder = TrajectoryBuilder(self.tokenizer, trajectory, tools=schemas)
        builder.start(rendered)
        return builder

    def _as_rendered(self, message: dict[str, Any]) -> Message:
        """An assistant message the gateway generated is rendered from the model's own text."""
        raw = self._raw_replies.get(message_key(message)) if message.get("role") == "assistant" else None
        if raw is not None:
            return to_message(message).model_copy(update={"content": raw, "tool_calls": None})
        return self._foreign(message)

    def _foreign(self, message: dict[str, Any]) -> Message:
        """A message the gateway did not generate (an agent's few-shot example, a resumed history), its tool calls
        written as the model would (`agentrl.gateway.turns.rendered_message`), so that the prompt holds them."""
        return rendered_message(message, self.tokenizer, self.parser)


def before_stop(text: str, stop: list[str] | None) -> tuple[str, str | None]:
    """`text` before the first stop sequence it holds (where the server stopped: the token that completed it may
    carry more text), and that sequence; `text` and None when it holds none."""
    hits = [(text.find(sequence), sequence) for sequence in stop or [] if sequence and sequence in text]
    if not hits:
        return text, None
    at, sequence = min(hits)
    return text[:at], sequence


def _cut(step: Trajectory, counts: tuple[int, int]) -> Trajectory:
    """`step` up to its last answered call (a copy, when a later call added to it)."""
    segments, messages = counts
    if segments == len(step.segments) and messages == len(step.messages):
        return step
    return step.model_copy(update={"segments": step.segments[:segments], "messages": step.messages[:messages]})


def generated_pieces(out: Generation) -> tuple[list[int], list[float] | None, int | None]:
    """One server output as a piece for `SessionRecorder.record`."""
    return list(out.token_ids), out.logprobs, out.policy_version
