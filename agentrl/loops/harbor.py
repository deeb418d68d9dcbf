"""Harbor task loops: the agent works in the task's own container, then the task's verifier grades it there.

Per trajectory: build (once) and start the task's image (`agentrl.harbor.container`), run the agent phase under
the task's `[agent].timeout_sec`, then copy `tests/` to `/tests` and run `tests/test.sh` in the same container
(`agentrl.harbor.verifier`), and remove the container. The verifier's result goes to
`trajectory.metadata["harbor"]["verifier"]` (rewards, exit code, the end of its output), which the `harbor_task`
reward turns into the score. The verifier runs whatever ended the agent phase (done, a budget, the time limit),
as Harbor's does; a failure of the model server or the container ends the trajectory without one.

* `harbor_agent`: the model gets the instruction and the sandboxed tools (`bash`, `editor`, `submit` from
  `tools:`); the phase ends when it answers without a tool call (or is reminded, `on_no_tool_call: remind`), calls
  `submit`, or a budget ends it (turns, tokens, the time limit).
* `harbor_oracle`: the task's reference solution, `solution/solve.sh`, copied to `/solution` and run; no model
  (checks that a task is solvable: it should score 1).

```yaml
agent:
  name: harbor_agent
  kwargs: {time_budget_s: 300, verifier_timeout_s: 120}   # caps on the tasks' own timeouts
tools: [{class: bash}, {class: editor}, {class: submit}]
sandbox: {backend: none, memory: 1g, cpus: 1.0}            # the loop starts each task's container itself
reward:
  components: [{name: tests, type: harbor_task}]
```
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import Field

from agentrl.config.schema import AgentConfig, AgentRLConfig, SandboxConfig
from agentrl.harbor.container import open_task_container_shielded, resolve_env, run_script
from agentrl.harbor.limits import TaskLimits, task_limits
from agentrl.harbor.task import HarborTask, HarborTaskError
from agentrl.harbor.verifier import run_verifier
from agentrl.loops.base import LoopOptions
from agentrl.loops.conformance.case import LoopCheckCase
from agentrl.loops.context import AgentContext
from agentrl.loops.forked_resources import OwnedResources, fork_sandbox_and_tools
from agentrl.loops.stepped import SteppedLoop
from agentrl.loops.tool_turns import answer_calls, execute_calls, record_final_calls, require_tools
from agentrl.sandbox.base import Sandbox
from agentrl.tools.parsers import get_parser
from agentrl.types import Sample, StopReason, Trajectory

NO_TOOL_CALL = "your reply called no tool. Use a tool to work on the task, or call `submit` when done."
ORACLE_LOG = "/logs/agent/oracle.txt"
SOLVE_TIMEOUT_S = 1800.0
"""Limit of solve.sh for a task without [agent].timeout_sec (the trajectory's own timeout still applies)."""
HARBOR_TASK = "a Harbor task (its sample, tools and container image)"
"""What the Harbor loops' own check case lacks (`LoopCheckCase.lacks`): a recipe's task."""


class HarborLoopOptions(LoopOptions):
    """`agent.kwargs` of the Harbor loops."""

    time_budget_s: float | None = Field(None, gt=0, description="cap on the tasks' [agent].timeout_sec")
    verifier_timeout_s: float | None = Field(None, gt=0, description="cap on the tasks' [verifier].timeout_sec")
    on_no_tool_call: Literal["stop", "remind"] = Field("stop", description="a reply without a tool call ends")


class HarborAgentLoop(SteppedLoop):
    """Solve a Harbor task with sandboxed tools in its container; its verifier's result lands in
    `metadata["harbor"]["verifier"]`.

    Container limits are the task's, capped by the run's `sandbox:` section; its `backend` may stay `none`.
    Its episodes fork (`rollout.tree`): each child gets a container of an image committed from the parent's (the
    task's files as the agent left them; no processes), the tools over it and what is left of the time limit.
    """

    Options = HarborLoopOptions

    @classmethod
    def check_case(cls) -> LoopCheckCase:
        """A Harbor task's container: a recipe's task (`agentrl check loop=harbor_agent recipe=harbor`) or a case of
        the caller's (`check_loop(..., case=...)`), answered by a reply that calls no tool (one turn)."""
        return LoopCheckCase(reply="I am done.", needs=frozenset({"docker"}), lacks=HARBOR_TASK)

    options: HarborLoopOptions
    uses_tools = True

    def __init__(self, config: AgentConfig | None = None, **kwargs: Any):
        super().__init__(config, **kwargs)
        self.parser = get_parser(self.config.tool_parser)

    @classmethod
    def environment_form(cls, cfg: AgentRLConfig) -> str:
        reader = cfg.data.harbor_reader
        return f"Harbor task folders {cfg.data.train_files} (data.train_files), read by {reader!r} (data.harbor_reader)"

    async def begin(self, sample: Sample, ctx: AgentContext) -> HarborState:
        task = HarborTask.from_sample(sample)
        traj = ctx.trajectory
        cfg = self._sandbox_config()
        limits = task_limits(task, cfg, self.options.time_budget_s, self.options.verifier_timeout_s)
        traj.metadata["harbor"] = {
            "task": task.name,
            "task_dir": str(task.path),
            "reader": task.reader,
            "limits": limits.record(),
        }
        self.check_start(ctx)
        ctx.start(sample.prompt)
        started = time.perf_counter()
        container = await open_task_container_shielded(task, limits, cfg, run_id=f"harbor-{traj.id[:8]}")
        _add_time(traj, "sandbox_setup_s", started)
        ctx.sandbox = container
        if ctx.tools is not None:
            ctx.tools.sandbox = container
        budget = limits.agent_timeout_s
        deadline = None if budget is None else asyncio.get_running_loop().time() + budget
        return HarborState(task, sample, limits, OwnedResources(container), deadline)

    def check_start(self, ctx: AgentContext) -> None:
        """What the agent phase needs, checked before a container starts."""
        require_tools(ctx, "harbor_agent")

    async def step(self, ctx: AgentContext, state: HarborState) -> bool:
        """One turn of the agent phase, under the task's agent time limit (spent: stop `time_budget`)."""
        try:
            async with asyncio.timeout_at(state.deadline):
                done = await self.turn(ctx, state)
            if not done and state.deadline is not None and asyncio.get_running_loop().time() >= state.deadline:
                raise TimeoutError  # spent during the turn: end here rather than fork an episode out of time
            return done
        except TimeoutError:
            ctx.trajectory.stop_reason = StopReason.TIME_BUDGET
            ctx.trajectory.error = f"time budget of {state.limits.agent_timeout_s:g}s spent"
            return True

    async def turn(self, ctx: AgentContext, state: HarborState) -> bool:
        """A tool turn; True when the model stopped calling tools or submitted."""
        turn = await ctx.generate()
        parsed = self.parser.parse(turn.text)
        errors = parsed.errors
        if not parsed.calls and not parsed.errors:
            if self.options.on_no_tool_call == "stop":
                ctx.finish()
                return True
            errors = [NO_TOOL_CALL]
        results = await execute_calls(ctx, parsed.calls, errors, self.config.max_parallel_tool_calls)
        if any(r.metadata.get("submitted") for r in results):
            record_final_calls(ctx, results)
            ctx.trajectory.stop_reason = StopReason.DONE
            return True
        answer_calls(ctx, results)
        return False

    async def end(self, ctx: AgentContext, state: HarborState) -> None:
        """Run the task's verifier in the container (whatever ended the agent phase), then remove it."""
        traj = ctx.trajectory
        try:
            verifying = time.perf_counter()
            result = await run_verifier(state.container, state.task, state.limits.verifier_timeout_s)
            traj.metadata["harbor"]["verifier"] = result.record()
            _add_time(traj, "verifier_s", verifying)
        finally:
            await self.fail(ctx, state)

    async def fail(self, ctx: AgentContext, state: HarborState) -> None:
        """After an error (the model server, the container) no verifier runs: the container is removed."""
        ctx.sandbox = None
        closing = time.perf_counter()
        await state.release()
        _add_time(ctx.trajectory, "sandbox_close_s", closing)

    async def fork_state(self, state: HarborState, children: list[AgentContext]) -> list[HarborState]:
        """Each child gets a container of the parent's committed at the fork (`Sandbox.fork` of a task image), the
        tools over it (`ToolSet.fork`) and the parent's deadline."""
        owned = await fork_sandbox_and_tools(state.container, children)
        return [replace(state, owned=resources) for resources in owned]

    async def discard(self, state: HarborState) -> None:
        await state.release()

    def _sandbox_config(self) -> SandboxConfig:
        return self.run_config.sandbox if self.run_config is not None else SandboxConfig(backend="docker")


@dataclass
class HarborState:
    """What the Harbor loops keep between turns: the task, its sample and limits, the container and tools the
    episode owns (the root owns its container; a fork, its container and tools) and the agent phase's deadline
    (event-loop time)."""

    task: HarborTask
    sample: Sample
    limits: TaskLimits
    owned: OwnedResources
    deadline: float | None = None

    @property
    def container(self) -> Sandbox:
        assert self.owned.sandbox is not None
        return self.owned.sandbox

    async def release(self) -> None:
        """Remove the container and free the fork's tools; calling it again does nothing."""
        await self.owned.release()


class HarborOracleLoop(HarborAgentLoop):
    """The reference solution as the agent: `solution/solve.sh` runs in the task's container (no model); its
    output's end goes to `metadata["harbor"]["solution"]`. One turn: forking it gives nothing to compare."""

    uses_tools = False
    forkable = False

    @classmethod
    def check_case(cls) -> LoopCheckCase:
        """A Harbor task's container (`agentrl check loop=harbor_oracle recipe=harbor`, or `check_loop(...,
        case=...)`); its reference solution plays no turn."""
        return LoopCheckCase(needs=frozenset({"docker"}), min_turns=0, lacks=HARBOR_TASK)

    def check_start(self, ctx: AgentContext) -> None:
        return None

    async def turn(self, ctx: AgentContext, state: HarborState) -> bool:
        task = state.task
        if not (task.solution_dir / "solve.sh").is_file():
            raise HarborTaskError(f"task {task.name} has no solution/solve.sh for the oracle to run")
        env = resolve_env(task.config.solution.env, f"{task.name}: [solution].env")
        env.setdefault("DEBIAN_FRONTEND", "noninteractive")
        timeout = state.limits.agent_timeout_s or SOLVE_TIMEOUT_S
        run, output = await run_script(
            state.container, task.solution_dir, "/solution", "solve.sh", timeout, env, ORACLE_LOG
        )
        ctx.trajectory.metadata["harbor"]["solution"] = _script_record(run, output)
        ctx.finish()
        return True


def _script_record(run: Any, output: str) -> dict[str, Any]:
    return {"exit_code": run.exit_code, "timed_out": run.timed_out, "output": output, "duration_s": run.duration}


def _add_time(traj: Trajectory, key: str, started: float) -> None:
    traj.timings[key] = traj.timings.get(key, 0.0) + time.perf_counter() - started


__all__ = ["HarborAgentLoop", "HarborLoopOptions", "HarborOracleLoop", "HarborState"]
