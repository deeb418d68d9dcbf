"""`AgentLoopBase` and the loop registry.

A loop is built once per loop kind per worker with its config, then `run` is awaited once per trajectory,
concurrently with many others: keep per-trajectory state in locals or in `ctx`, never on `self`.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, TypeVar

from agentrl.config.schema import AgentConfig
from agentrl.errors import UserError
from agentrl.loops.context import AgentContext
from agentrl.types import Sample, Trajectory

_REGISTRY: dict[str, str | type[AgentLoopBase]] = {
    "single_turn": "agentrl.loops.single_turn:SingleTurnAgentLoop",
    "tool_agent": "agentrl.loops.tool_calling:ToolAgentLoop",
}

L = TypeVar("L", bound="type[AgentLoopBase]")


class AgentLoopBase(ABC):
    """Base class of agent loops.

    Subclass it, implement `run`, and register it:

        @register_loop("guess_number")
        class GuessNumberLoop(AgentLoopBase):
            async def run(self, sample, ctx):
                ctx.start(sample.prompt)
                turn = await ctx.generate()
                ...
                return ctx.trajectory

    `ctx.start`, `ctx.generate` and `ctx.add_messages` keep the trajectory's tokens exact; raise
    `StopLoop(reason)` (or let a budget raise it) to end with a stop reason.
    """

    uses_tools: bool = False
    run_config: Any = None
    """The whole run's `AgentRLConfig` when run by `agentrl rollout/train` (None in bare use)."""

    def __init__(self, config: AgentConfig | None = None, **kwargs: Any):
        self.config = config or AgentConfig()
        self.kwargs = {**self.config.kwargs, **kwargs}

    @abstractmethod
    async def run(self, sample: Sample, ctx: AgentContext) -> Trajectory:
        """Run one trajectory for `sample` and return `ctx.trajectory`."""


def register_loop(name: str) -> Callable[[L], L]:
    """Class decorator registering an `AgentLoopBase` subclass under `name`."""

    def decorate(cls: L) -> L:
        if not (isinstance(cls, type) and issubclass(cls, AgentLoopBase)):
            raise TypeError(f"@register_loop({name!r}) must decorate an AgentLoopBase subclass")
        _REGISTRY[name] = cls
        return cls

    return decorate


def known_loops() -> list[str]:
    return sorted(_REGISTRY)


def get_loop_class(name: str) -> type[AgentLoopBase]:
    """Resolve a registered loop name or a dotted path (`pkg.mod:Class` or `pkg.mod.Class`).

    Raises:
        UserError: unknown name (the message lists the known ones) or a path that is not a loop class.
    """
    target = _REGISTRY.get(name, name)
    if isinstance(target, type):
        return target
    if ":" not in target and "." not in target:
        raise UserError(
            f"unknown agent loop {name!r}; known loops: {', '.join(known_loops())}, or give a dotted path "
            "such as mypkg.loops:MyLoop"
        )
    cls = _import(target)
    if not (isinstance(cls, type) and issubclass(cls, AgentLoopBase)):
        raise UserError(f"{target} is not an AgentLoopBase subclass")
    return cls


def _import(path: str) -> Any:
    module_name, _, attr = path.partition(":") if ":" in path else path.rpartition(".")
    try:
        module = importlib.import_module(module_name)
        return getattr(module, attr)
    except (ImportError, AttributeError) as exc:
        raise UserError(f"cannot import agent loop {path!r} ({exc}); known loops: {', '.join(known_loops())}") from None
