"""What a forked episode owns: its sandbox and the tools over it, made by the fork and freed once at its end.

The tool, SWE and Harbor loops fork the same way (`fork_sandbox_and_tools`): `Sandbox.fork` gives each child its
sandbox, `ToolSet.fork` its tools over it, and the child's context records `FORK_NOTE`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from agentrl.loops.context import AgentContext
from agentrl.sandbox.base import FORK_NOTE, Sandbox
from agentrl.tools.toolset import ToolSet


@dataclass
class OwnedResources:
    """A sandbox and tools an episode owns; `release` frees them once."""

    sandbox: Sandbox | None
    tools: ToolSet | None = None
    released: bool = field(default=False, repr=False)

    async def release(self) -> None:
        """Free the tools, then close the sandbox (shielded); calling it again does nothing."""
        if self.released:
            return
        self.released = True
        try:
            if self.tools is not None:
                await self.tools.release()
        finally:
            if self.sandbox is not None:
                await asyncio.shield(self.sandbox.close())


async def fork_sandbox_and_tools(sandbox: Sandbox | None, children: list[AgentContext]) -> list[OwnedResources]:
    """Fork `sandbox` (if any) and the first child's tools (the parent's, as `AgentContext.fork` copied them) once
    per child; sets each child's `sandbox`, `tools` and `metadata["fork"]`. Nothing is left open on failure."""
    parent = children[0]
    sandboxes = await sandbox.fork(len(children)) if sandbox is not None else [None] * len(children)
    owned: list[OwnedResources] = []
    try:
        for ctx, child_sandbox in zip(children, sandboxes, strict=True):
            tools = parent.tools.fork(ctx.trajectory.id, child_sandbox) if parent.tools is not None else None
            ctx.sandbox, ctx.tools = child_sandbox, tools
            if child_sandbox is not None:
                ctx.trajectory.metadata["fork"] = FORK_NOTE
            owned.append(OwnedResources(child_sandbox, tools))
    except BaseException:
        await asyncio.gather(*(s.close() for s in sandboxes if s is not None))
        raise
    return owned
