"""Demonstrations for supervised fine-tuning (`trainer.objective=sft`, `data.demonstrations`): each one a
`Trajectory` whose trainable segments, the assistant's replies, are the targets.

Two kinds of rows, told apart per line:

- an agentrl trajectory (`Trajectory.to_json`: the `trajectories/*.jsonl.gz` of a training run, the
  `trajectories.jsonl` of `agentrl rollout` or `agentrl eval`, the sessions the gateway saves): its own tokens,
  every step sample a row. Its tokens must be the student's tokenizer's (a teacher of the same family); a teacher
  of another family is recorded as chat rows.
- a chat row, `{"messages": [...], "tools": [...]}` in the OpenAI shape (assistant `tool_calls` included), with an
  optional `reward`: rendered with the student's chat template as the loops render a conversation (`render_chat`):
  tools the template has no slot for are described in the system prompt in the `agent.tool_parser`'s format, and
  tool calls the template does not write itself are written in that format after the reply's text, as the gateway
  renders an agent's history.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agentrl.config.schema import DataConfig
from agentrl.errors import UserError
from agentrl.gateway.messages import MessageError
from agentrl.gateway.turns import TemplateRewriteError, assistant_turn_ids, rendered_message
from agentrl.loops.builder import TemplateBoundaryError, TrajectoryBuilder
from agentrl.tools.parsers import ToolCallParser
from agentrl.tools.prompt import add_tool_instructions, template_has_tools_slot
from agentrl.types import StopReason, Trajectory


def load_demonstrations(data: DataConfig, tokenizer: Any, parser: ToolCallParser) -> list[Trajectory]:
    """Every demonstration of `data.demonstrations` that `data.min_reward` and `data.stop_reasons` keep, each step
    sample of a trajectory a row of its own.

    Raises:
        UserError: no files, a file that is missing or holds a line of neither kind, or nothing left to train on.
    """
    if not data.demonstrations:
        raise UserError(
            "trainer.objective=sft trains on demonstrations, and data.demonstrations lists none: give JSONL files of "
            "agentrl trajectories or chat rows, e.g. data.demonstrations=[runs/teacher/trajectories.jsonl]"
        )
    rows: list[Trajectory] = []
    seen = 0
    for path in data.demonstrations:
        for number, row in _lines(Path(path)):
            seen += 1
            episode, chat = _episode(row, tokenizer, parser, f"line {number} of {path}")
            if _kept(episode, data, chat):
                rows += [s for s in episode.step_samples() if s.num_generated_tokens]
    if not rows:
        raise UserError(
            f"data.demonstrations: none of the {seen} rows in {', '.join(data.demonstrations)} is left to train on "
            f"(data.min_reward={data.min_reward}, data.stop_reasons={data.stop_reasons}, failed episodes and rows "
            "without an assistant reply left out): lower data.min_reward, widen data.stop_reasons, or record more"
        )
    return rows


def render_chat(
    messages: list[dict[str, Any]],
    tokenizer: Any,
    parser: ToolCallParser,
    tools: list[dict[str, Any]] | None = None,
    trajectory_id: str = "demonstration",
) -> Trajectory:
    """A chat conversation as the trajectory a loop would have recorded had the model written its assistant turns:
    each assistant turn's tokens are the template's text for it up to and including its end-of-turn token
    (trainable, no logprobs), everything else the template's suffix (context). Messages after the last assistant
    turn teach nothing and are left out.

    Raises:
        UserError: no assistant message, or a template that does not render the conversation as it grows.
    """
    rendered = [rendered_message(m, tokenizer, parser) for m in messages]
    last = max((i for i, m in enumerate(rendered) if m.role == "assistant"), default=None)
    if last is None or last == 0:
        raise UserError(f"{trajectory_id}: a demonstration needs a prompt and at least one assistant message after it")
    rendered = rendered[: last + 1]
    schemas = tools or None
    if schemas and not template_has_tools_slot(tokenizer):
        rendered = add_tool_instructions(rendered, parser.format_instructions(schemas))
        schemas = None
    builder = TrajectoryBuilder(tokenizer, Trajectory(id=trajectory_id), tools=schemas)
    first = next(i for i, m in enumerate(rendered) if m.role == "assistant")
    builder.start(rendered[:first])
    at = first
    while at < len(rendered):
        if rendered[at].role == "assistant":
            try:
                ids = assistant_turn_ids(tokenizer, builder.trajectory.messages, rendered[at], schemas)
            except TemplateRewriteError as exc:
                raise UserError(f"{trajectory_id}: {exc}; such a conversation cannot be a demonstration") from exc
            builder.add_generation(ids, None, None)
            at += 1
            continue
        upto = next(i for i in range(at, len(rendered)) if rendered[i].role == "assistant")
        try:
            builder.add_messages(rendered[at:upto])
        except TemplateBoundaryError as exc:
            raise UserError(f"{trajectory_id}: {exc}; such a conversation cannot be a demonstration") from exc
        at = upto
    return builder.trajectory


def _episode(row: dict[str, Any], tokenizer: Any, parser: ToolCallParser, where: str) -> tuple[Trajectory, bool]:
    """The row's episode, and whether it is a chat row."""
    if "segments" in row:
        return Trajectory.model_validate(row), False
    if "messages" not in row:
        raise UserError(
            f"{where} is neither an agentrl trajectory (with `segments`) nor a chat row (with `messages`); data."
            "demonstrations takes trajectory files (agentrl rollout/eval/train, the gateway) and OpenAI-style chat "
            "rows"
        )
    try:
        episode = render_chat(row["messages"], tokenizer, parser, row.get("tools"), trajectory_id=where)
    except MessageError as exc:
        raise UserError(f"{where}: {exc}") from exc
    if row.get("reward") is not None:
        episode.reward = float(row["reward"])
    episode.stop_reason = StopReason(row.get("stop_reason", "done"))
    return episode, True


def _kept(episode: Trajectory, data: DataConfig, chat: bool) -> bool:
    """Not failed, rewarded at least `data.min_reward` (a chat row without a reward passes), and ended as
    `data.stop_reasons` asks."""
    if episode.failed:
        return False
    if data.min_reward is not None:
        if episode.reward is None and not chat:
            return False
        if episode.reward is not None and episode.reward < data.min_reward:
            return False
    return not data.stop_reasons or str(episode.stop_reason) in data.stop_reasons


def _lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    if not path.is_file():
        raise UserError(f"data.demonstrations: {path} is not a file; give JSONL files (or .jsonl.gz) of demonstrations")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                try:
                    yield number, json.loads(line)
                except json.JSONDecodeError as exc:
                    raise UserError(f"line {number} of {path} is not JSON ({exc}); one JSON object a line") from exc
