"""`ToolSet`: the tools of one trajectory, executing calls safely — every failure becomes an error result."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any

from agentrl.errors import ForkUnsupportedError, UserError
from agentrl.tools.base import Tool, ToolCall, ToolContext, ToolResult
from agentrl.tools.output import cap_output, to_text
from agentrl.tools.validation import describe_parameters, validate_arguments

logger = logging.getLogger(__name__)

METRIC_KEYS = (
    "tool/calls",
    "tool/errors",
    "tool/timeouts",
    "tool/unknown",
    "tool/bad_args",
    "tool/ignored_args",
    "tool/parse_errors",
    "tool/truncated",
    "tool/time_s",
)


class ToolSet:
    """The tools of one trajectory: creates each on first use, runs calls, releases them at the end.

    `execute` never raises (except on cancellation): an unknown tool, bad arguments, an exception or a
    timeout each come back as a `ToolResult` with `is_error=True` and a message the model can act on.

    Args:
        tools: the tools offered; instances may be shared with other trajectories.
        trajectory_id: id of the trajectory, passed to the tools in their `ToolContext`.
        sandbox: the trajectory's sandbox lease, if any.
        timeout_s: per-call timeout for tools that set none themselves.
        max_output_tokens: cap of each result's content; 0 disables it.
        count_tokens: counts tokens with the policy's tokenizer (default: ~4 characters per token).
        truncate_tokens: keeps the first n tokens of a text (default: ~4 characters per token).
        max_consecutive_errors: errors in a row after which `error_limit_reached()`; 0 disables the limit.
    """

    def __init__(
        self,
        tools: list[Tool],
        *,
        trajectory_id: str,
        sandbox: Any = None,
        timeout_s: float = 30.0,
        max_output_tokens: int = 1024,
        count_tokens: Callable[[str], int] | None = None,
        truncate_tokens: Callable[[str, int], str] | None = None,
        max_consecutive_errors: int = 3,
    ) -> None:
        self.tools: dict[str, Tool] = {t.name: t for t in tools}
        if len(self.tools) != len(tools):
            names = [t.name for t in tools]
            raise UserError(f"tool names must be unique within a trajectory, got {names}")
        self.trajectory_id = trajectory_id
        self.sandbox = sandbox
        self.timeout_s = timeout_s
        self.max_output_tokens = max_output_tokens
        self.count_tokens = count_tokens
        self.truncate_tokens = truncate_tokens
        self.max_consecutive_errors = max_consecutive_errors
        self.metrics: dict[str, float] = dict.fromkeys(METRIC_KEYS, 0.0)
        self._consecutive_errors = 0
        self._shared: dict[str, Any] = {}
        self._contexts: dict[str, ToolContext] = {}
        self._created: set[str] = set()
        self._create_locks: dict[str, asyncio.Lock] = {}

    def schemas(self) -> list[dict[str, Any]]:
        """The tools in the OpenAI function-tool format, for the chat template or the system prompt."""
        return [t.schema() for t in self.tools.values()]

    @property
    def consecutive_errors(self) -> int:
        """Errors since the last successful call."""
        return self._consecutive_errors

    def error_limit_reached(self) -> bool:
        """Whether `max_consecutive_errors` errors happened in a row (the loop should stop)."""
        return 0 < self.max_consecutive_errors <= self._consecutive_errors

    def context(self, name: str) -> ToolContext:
        """The per-trajectory context of the tool `name` (made on first request)."""
        if name not in self._contexts:
            self._contexts[name] = ToolContext(self.trajectory_id, sandbox=self.sandbox, shared=self._shared)
        return self._contexts[name]

    async def execute(self, call: ToolCall) -> ToolResult:
        """Run one call and return its result, capped to `max_output_tokens`; never raises."""
        start = time.perf_counter()
        self.metrics["tool/calls"] += 1
        result = await self._run(call)
        result.duration_s = time.perf_counter() - start
        self.metrics["tool/time_s"] += result.duration_s
        return self._finish(result)

    def record_parse_error(self, message: str, *, call_id: str = "") -> ToolResult:
        """An error result for tool-call text that could not be parsed, counted like other errors."""
        self.metrics["tool/parse_errors"] += 1
        return self._finish(ToolResult(call_id=call_id, name="", content=f"Error: {message}", is_error=True))

    def fork(self, trajectory_id: str, sandbox: Any = None) -> ToolSet:
        """The tools of a forked trajectory: the same tools and settings, this set's counters and metrics so far,
        a copy of the tools' shared per-trajectory state, and the child's own `sandbox`.

        Raises:
            ForkUnsupportedError: a tool already in use holds per-trajectory resources (it overrides
                `Tool.create`), which cannot be copied.
        """
        holding = [n for n in self._created if type(self.tools[n]).create is not Tool.create]
        if holding:
            raise ForkUnsupportedError(
                f"tool {holding[0]!r} holds resources of its own per trajectory (Tool.create), which a fork cannot "
                "copy; keep its state in the sandbox, or run without a tree"
            )
        child = copy.copy(self)
        child.trajectory_id, child.sandbox = trajectory_id, sandbox
        child.metrics = dict(self.metrics)
        child._shared = copy.deepcopy(self._shared)
        child._contexts, child._created, child._create_locks = {}, set(self._created), {}
        return child

    async def release(self) -> None:
        """Release every created tool, logging (not raising) their errors; calling it again does nothing."""
        created, self._created = self._created, set()
        for name in created:
            tool, ctx = self.tools[name], self.context(name)
            try:
                async with asyncio.timeout(self._timeout(tool)):
                    await tool.release(ctx)
            except Exception:
                logger.exception("releasing tool '%s' of trajectory %s failed", name, self.trajectory_id)

    def _without_ignored_arguments(self, tool: Tool, call: ToolCall) -> ToolCall:
        """The call without the arguments its tool's schema does not list, for a tool configured to ignore them
        (`config: {extra_arguments: ignore}`: a small model's stray keys); counted in `tool/ignored_args`."""
        if getattr(tool.cfg, "extra_arguments", "refuse") != "ignore" or not isinstance(call.arguments, dict):
            return call
        known = tool.parameters.get("properties", {})
        kept = {k: v for k, v in call.arguments.items() if k in known}
        if len(kept) == len(call.arguments):
            return call
        self.metrics["tool/ignored_args"] += 1
        return dataclasses.replace(call, arguments=kept)

    async def _run(self, call: ToolCall) -> ToolResult:
        tool = self.tools.get(call.name)
        if tool is None:
            self.metrics["tool/unknown"] += 1
            available = ", ".join(self.tools) or "none"
            return _error(call, f"Error: unknown tool '{call.name}'. Available tools: {available}.")
        call = self._without_ignored_arguments(tool, call)
        problems = validate_arguments(call.arguments, tool.parameters)
        if problems:
            self.metrics["tool/bad_args"] += 1
            expected = describe_parameters(tool.parameters)
            text = f"Error: invalid arguments for tool '{call.name}': {'; '.join(problems)}. Expected: {expected}."
            return _error(call, text)
        try:
            await self._ensure_created(tool)
        except Exception as exc:
            logger.warning("creating tool '%s' failed: %r", tool.name, exc)
            return _error(call, f"Error: tool '{call.name}' could not start: {_describe(exc)}")
        return await self._call(tool, call)

    async def _ensure_created(self, tool: Tool) -> None:
        lock = self._create_locks.setdefault(tool.name, asyncio.Lock())
        async with lock:  # parallel first calls must create the tool once
            if tool.name not in self._created:
                await tool.create(self.context(tool.name))
                self._created.add(tool.name)

    async def _call(self, tool: Tool, call: ToolCall) -> ToolResult:
        timeout = self._timeout(tool)
        try:
            async with asyncio.timeout(timeout) as scope:
                output = await tool.execute(dict(call.arguments), self.context(tool.name))
        except TimeoutError as exc:
            if not scope.expired():  # raised by the tool itself, not our deadline
                return _error(call, f"Error: tool '{call.name}' failed: {_describe(exc)}")
            self.metrics["tool/timeouts"] += 1
            result = _error(call, f"Error: tool '{call.name}' timed out after {timeout:g}s.")
            result.timed_out = True
            return result
        except Exception as exc:
            return _error(call, f"Error: tool '{call.name}' failed: {_describe(exc)}")
        if isinstance(output, ToolResult):
            output.call_id, output.name = call.id, call.name
            return output
        return ToolResult(call_id=call.id, name=call.name, content=to_text(output))

    def _timeout(self, tool: Tool) -> float:
        return tool.timeout_s if tool.timeout_s is not None else self.timeout_s

    def _finish(self, result: ToolResult) -> ToolResult:
        """Cap the content and update the error counters and metrics."""
        result.content, truncated = cap_output(
            result.content, self.max_output_tokens, self.count_tokens, self.truncate_tokens
        )
        result.truncated = result.truncated or truncated
        self.metrics["tool/truncated"] += result.truncated
        if result.is_error:
            self.metrics["tool/errors"] += 1
            self._consecutive_errors += 1
        else:
            self._consecutive_errors = 0
        return result


def _error(call: ToolCall, content: str) -> ToolResult:
    return ToolResult(call_id=call.id, name=call.name, content=content, is_error=True)


def _describe(exc: BaseException) -> str:
    message = str(exc)
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__
