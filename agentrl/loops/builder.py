"""Builds a trajectory token by token: generated tokens as returned, other messages as the template's suffix.

The model's tokens are never re-tokenized. A non-assistant message (tool result, user turn, observation) is
appended as exactly the text the chat template adds after the conversation so far — including template text that
follows the model's end-of-turn token (ChatML's newline after `<|im_end|>`), which the model never generates.
"""

from __future__ import annotations

import functools
from typing import Any

from agentrl.loops.chat_template import encode, render
from agentrl.types import Message, Role, Segment, Trajectory


class TemplateBoundaryError(RuntimeError):
    """The chat template does not render the conversation as an extension of its previous rendering (it rewrote
    history: a reasoning template dropping earlier `<think>` blocks, a template marking the last message). The
    callers start a new step sample from the template's real rendering instead (`AgentContext.add_messages`, the
    gateway's recorder)."""


class TrajectoryBuilder:
    """Appends segments and messages to a `Trajectory` so that tokens and messages stay in step."""

    def __init__(self, tokenizer: Any, trajectory: Trajectory, tools: list[dict[str, Any]] | None = None):
        self.tokenizer = tokenizer
        self.trajectory = trajectory
        self.tools = tools
        self._last_generated_text: str | None = None

    def copy_for(self, trajectory: Trajectory) -> TrajectoryBuilder:
        """A builder of `trajectory` (a copy of this one's, forked) in the same state as this one."""
        copy = TrajectoryBuilder(self.tokenizer, trajectory, tools=self.tools)
        copy._last_generated_text = self._last_generated_text
        return copy

    @property
    def num_tokens(self) -> int:
        return self.trajectory.num_tokens

    def start(self, messages: list[Message], add_generation_prompt: bool = True) -> list[int]:
        """Render the prompt (with the generation prompt) as the first, non-trainable segment."""
        if self.trajectory.segments:
            raise RuntimeError("start() must be called once, before anything else is appended")
        ids = self.prompt_ids(messages, add_generation_prompt)
        self.trajectory.messages = list(messages)
        self.trajectory.append(Segment(token_ids=ids, trainable=False, role=messages[-1].role))
        self._last_generated_text = None
        return ids

    def prompt_ids(self, messages: list[Message], add_generation_prompt: bool = True) -> list[int]:
        """The tokens of the template's rendering of `messages` as a whole (what a server given them sees)."""
        return encode(self.tokenizer, self._render(messages, add_generation_prompt=add_generation_prompt))

    def add_generation(
        self,
        token_ids: list[int],
        logprobs: list[float] | None,
        policy_version: int | None,
        temperature: float | None = None,
    ) -> str:
        """Append the model's tokens exactly as generated; returns the assistant's text (end token stripped)."""
        return self.add_generation_pieces([(token_ids, logprobs, policy_version)], temperature)

    def add_generation_pieces(
        self,
        pieces: list[tuple[list[int], list[float] | None, int | None]],
        temperature: float | None = None,
        policy: str | None = None,
        trainable: bool = True,
        player: str | None = None,
    ) -> str:
        """Append one assistant turn generated in pieces (a partial rollout: interrupted by weight pushes and
        continued from its exact prefix), one trainable segment per piece with the version that generated it;
        returns the turn's text (end token stripped). Empty pieces are left out, but a turn always has a segment
        (the last piece's, when all are empty), so that every generation is a turn (`Trajectory.turn_index`).
        `temperature`: the one the turn was sampled at (its logprobs are of that tempered distribution); `policy`:
        the policy that generated it (`Segment.policy`); `trainable=False`: a frozen policy's reply, context for
        every policy that learns (it is then no turn); `player`: the episode's role that generated it
        (`Segment.player`)."""
        token_ids: list[int] = []
        for ids, logprobs, version in [p for p in pieces if p[0]] or pieces[-1:]:
            segment = Segment(
                token_ids=ids,
                trainable=trainable,
                logprobs=logprobs,
                policy_version=version,
                temperature=temperature,
                policy=policy,
                player=player,
            )
            self.trajectory.append(segment)
            token_ids += ids
        text = self.tokenizer.decode(token_ids, skip_special_tokens=False)
        self._last_generated_text = text
        content = self._strip_end(token_ids, text)
        self.trajectory.messages.append(Message(role="assistant", content=content))
        return content

    def suffix_ids(self, new: list[Message], add_generation_prompt: bool = True) -> list[int]:
        """The tokens the template adds for `new` messages after the conversation so far (not appended).

        Raises:
            TemplateBoundaryError: the template renders the longer conversation so that it does not extend the
                rendering so far.
        """
        prev = self._render(self.trajectory.messages, add_generation_prompt=False)
        full = self._render([*self.trajectory.messages, *new], add_generation_prompt=add_generation_prompt)
        if not full.startswith(prev):
            raise TemplateBoundaryError(
                "the chat template renders the conversation differently once messages are added; "
                "the trajectory cannot be extended exactly"
            )
        return encode(self.tokenizer, self._trailing_template_text(prev) + full[len(prev) :])

    def add_messages(self, new: list[Message], add_generation_prompt: bool = True) -> list[int]:
        """Append non-assistant messages as a non-trainable segment of the template's exact suffix."""
        ids = self.suffix_ids(new, add_generation_prompt)
        self.append_messages(new, ids)
        return ids

    def append_messages(self, new: list[Message], ids: list[int]) -> None:
        """Append messages whose suffix tokens were computed by `suffix_ids` (which renders the conversation so
        far without a generation prompt: one the tokens end with, that nothing was generated from, is taken off
        first, see `_retract_generation_prompt`)."""
        self._retract_generation_prompt()
        role: Role = new[-1].role if new else "user"
        self.trajectory.append(Segment(token_ids=ids, trainable=False, role=role))
        self.trajectory.messages.extend(new)
        self._last_generated_text = None

    def _retract_generation_prompt(self) -> None:
        """Take a generation prompt nothing was generated from off the end of the tokens (messages added twice in
        a row, the first time ready for a reply: a summary asked for after tool results), so that the next
        messages follow the conversation as the template renders it, not an empty assistant turn. The last
        segment is then replaced by its own first tokens (never re-tokenized), the only case where an appended
        segment changes; left as it is when its tokens do not end with exactly the template's generation prompt."""
        segments, messages = self.trajectory.segments, self.trajectory.messages
        if not segments or segments[-1].trainable or not messages or messages[-1].role == "assistant":
            return
        without = self._render(messages, add_generation_prompt=False)
        prompt = self._render(messages, add_generation_prompt=True)[len(without) :]
        last = segments[-1]
        text = self.tokenizer.decode(last.token_ids, skip_special_tokens=False)
        if not prompt or not without.endswith(text[: -len(prompt)]) or not text.endswith(prompt):
            return
        kept = encode(self.tokenizer, text[: -len(prompt)])
        if kept and last.token_ids[: len(kept)] == kept:
            segments[-1] = last.model_copy(update={"token_ids": kept})

    def _render(self, messages: list[Message], add_generation_prompt: bool) -> str:
        return render(self.tokenizer, messages, add_generation_prompt=add_generation_prompt, tools=self.tools)

    def _trailing_template_text(self, prev: str) -> str:
        """Template text after the model's last token (e.g. the newline after `<|im_end|>`), if any."""
        generated = self._last_generated_text
        if not generated:
            return ""
        at = prev.rfind(generated)
        if at < 0:
            return ""  # the template rewrote the assistant turn; the drift checker reports the difference
        return prev[at + len(generated) :]

    def _strip_end(self, token_ids: list[int], text: str) -> str:
        """The text without the end-of-turn token the model ended with (decoded once, stripped as text)."""
        if not token_ids or token_ids[-1] not in _end_token_ids(self.tokenizer):
            return text
        end_text = self.tokenizer.decode(token_ids[-1:], skip_special_tokens=False)
        if text.endswith(end_text):
            return text[: -len(end_text)]
        return self.tokenizer.decode(token_ids[:-1], skip_special_tokens=False)


@functools.lru_cache(maxsize=32)
def _end_token_ids(tokenizer: Any) -> frozenset[int]:
    ids = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
    for token in ("<|im_end|>", "<|eot_id|>", "<|endoftext|>"):
        tid = tokenizer.convert_tokens_to_ids(token)
        if isinstance(tid, int) and tid != tokenizer.unk_token_id and tid is not None:
            ids.add(tid)
    return frozenset(ids)
