"""Agentic rules: how the agent used its tools, and whether a command passes in its sandbox."""

from __future__ import annotations

from typing import Any

from agentrl.rewards.base import RewardError, RewardInput, RewardResult, message_text
from agentrl.rewards.rule import normalize, references

_TAIL = 2000


def tool_counts(inp: RewardInput) -> tuple[dict[str, int], int]:
    """Calls per tool name, and failed calls, read from the trajectory.

    Calls are the tool messages after the prompt (one per executed call, named by the tool; a prompt's worked
    examples are not the agent's calls), plus the calls of a turn that ended the episode, whose results the loop
    never added as messages (a submission: `trajectory.metadata["final_tool_calls"]`). Errors come from the tool
    set's `tool/errors` metric when the loop recorded it, else from those tool messages that start with "Error".
    """
    calls: dict[str, int] = {}
    errors = 0
    for message in inp.agent_messages:
        if message.role == "tool":
            calls[message.name or ""] = calls.get(message.name or "", 0) + 1
            errors += message_text(message).lstrip().startswith("Error")
    for name in inp.trajectory.metadata.get("final_tool_calls", []):
        calls[name] = calls.get(name, 0) + 1
    if "tool/errors" in inp.trajectory.metrics:
        errors = int(inp.trajectory.metrics["tool/errors"])
    return calls, errors


def tool_use(
    inp: RewardInput,
    tool: str | None = None,
    min_calls: int = 1,
    max_calls: int | None = None,
    max_errors: int | None = None,
) -> RewardResult:
    """1 when the agent's tool use meets every given bound, else 0.

    Args:
        tool: count only calls to this tool (default: every tool).
        min_calls: at least this many calls (e.g. "called `search` at least once").
        max_calls: at most this many calls.
        max_errors: at most this many failed calls over all tools (`0`: no tool errors).
    """
    calls, errors = tool_counts(inp)
    n = calls.get(tool, 0) if tool is not None else sum(calls.values())
    failed: list[str] = []
    if n < min_calls:
        failed.append(f"{n} calls{f' to {tool}' if tool else ''} < {min_calls}")
    if max_calls is not None and n > max_calls:
        failed.append(f"{n} calls > {max_calls}")
    if max_errors is not None and errors > max_errors:
        failed.append(f"{errors} tool errors > {max_errors}")
    return RewardResult(float(not failed), {"calls": calls, "errors": errors, "failed": failed})


def tool_result(inp: RewardInput, tool: str | None = None) -> RewardResult:
    """1 when a successful tool result (of `tool`, or any tool) equals a reference answer (after `normalize`).

    Shaping for tool-use tasks: it credits a call that computed the answer, which cannot be earned without doing
    the task's hard part (choosing the right tool and arguments), and leaves reporting the result to the answer
    reward.
    """
    accepted = {normalize(ref) for ref in references(inp.sample.ground_truth)}
    results = _tool_results(inp, tool)
    return RewardResult(float(any(normalize(r) in accepted for r in results)), {"tool_results": results[-5:]})


def uses_tool_result(inp: RewardInput, tool: str | None = None) -> RewardResult:
    """1 when the final answer contains a successful tool result (of `tool`, or any tool) as whole words: the
    agent used what its tool returned."""
    answer = f" {normalize(inp.answer)} "
    results = [r for r in (normalize(text) for text in _tool_results(inp, tool)) if r]
    return RewardResult(float(any(f" {r} " in answer for r in results)), {"tool_results": results[-5:]})


def _tool_results(inp: RewardInput, tool: str | None) -> list[str]:
    """The texts of the agent's tool messages (of `tool`) that are not errors; a prompt's examples are not its own."""
    texts = [message_text(m) for m in inp.agent_messages if m.role == "tool" and (tool is None or m.name == tool)]
    return [text for text in texts if not text.lstrip().startswith("Error")]


async def command_passes(
    inp: RewardInput,
    command: str | None = None,
    timeout: float | None = None,
    workdir: str | None = None,
    answer_file: str | None = None,
) -> RewardResult:
    """1 when `command` exits 0 in the trajectory's sandbox (e.g. the repository's tests), else 0.

    Args:
        command: the shell command; default the sample's `reward_spec["command"]` (per-task tests).
        timeout: seconds before the command is killed (a timeout scores 0); default the sandbox's.
        workdir: folder to run in; default the sandbox's workdir.
        answer_file: write the model's final answer to this file first (for checks on the answer itself).

    Raises:
        RewardError: no sandbox or no command (the pipeline's failure policy applies).
    """
    if inp.sandbox is None:
        raise RewardError("no sandbox: the command reward needs the trajectory's sandbox (sandbox.backend)")
    cmd = command or inp.sample.reward_spec.get("command")
    if not cmd:
        raise RewardError("no command: set `command` on the component or `reward_spec.command` on the sample")
    if answer_file:
        await inp.sandbox.write_file(answer_file, inp.answer)
    result = await inp.sandbox.exec(cmd, timeout=timeout, workdir=workdir)
    details: dict[str, Any] = {
        "command": cmd,
        "exit_code": result.exit_code,
        "timed_out": result.timed_out,
        "stdout": result.stdout[-_TAIL:],
        "stderr": result.stderr[-_TAIL:],
    }
    return RewardResult(float(result.exit_code == 0 and not result.timed_out), details)


command_passes.default_timeout_s = None  # type: ignore[attr-defined]  # the sandbox enforces `timeout`
