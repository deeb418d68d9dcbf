"""SWEAgentLoop: an agent fixes an issue in a repository inside a container of the task's own image.

Per trajectory: start a container from the task's image (`image_name`) with the repository copied to `/work`,
give the model the problem statement and the sandboxed tools (`bash`, `editor`, `submit` from `tools:`), run
turns until it submits or a budget ends the episode, then take its changes out as a diff (`git diff` against the
base commit, new files included) into `trajectory.metadata["model_patch"]`. The container is removed at the end,
also on errors and cancellation. Grading is the reward's job (`swe_tests`), in a fresh container.

Budgets end the episode with their stop reason and the patch is still extracted: `agent.max_turns` (max_turns),
`agent.max_total_tokens` / `rollout.max_model_len` (context_overflow), `rollout.max_tokens` per turn
(max_tokens), `agent.kwargs.time_budget_s` (time_budget), `agent.max_consecutive_tool_errors` (tool_error_limit).

```yaml
agent:
  name: swe_agent
  kwargs: {time_budget_s: 600, on_no_tool_call: remind}
tools: [{class: bash}, {class: editor}, {class: submit}]
```
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentrl.config.schema import AgentConfig, AgentRLConfig, SandboxConfig
from agentrl.loops.base import LoopOptions
from agentrl.loops.conformance.case import LoopCheckCase
from agentrl.loops.context import AgentContext
from agentrl.loops.forked_resources import OwnedResources, fork_sandbox_and_tools
from agentrl.loops.stepped import SteppedLoop
from agentrl.loops.tool_turns import answer_calls, execute_calls, record_final_calls, require_tools
from agentrl.sandbox.base import Sandbox
from agentrl.swe.gold_edit import one_line_fix
from agentrl.swe.repo import extract_patch, open_task_sandbox, work_repo
from agentrl.swe.task import SWETask, TaskError
from agentrl.tools.base import ToolCall
from agentrl.tools.parsers import get_parser
from agentrl.types import Message, Sample, StopReason, Trajectory

PROMPT = """\
A Python repository is checked out at {repo_dir} (your working folder). Here is an issue reported against it:

<issue>
{problem_statement}
</issue>

Change the non-test source files in {repo_dir} so that the issue is resolved. Explore with the tools, \
reproduce the problem, make a minimal fix, check it, then call `submit`."""

NO_TOOL_CALL = "Error: your reply called no tool. Use a tool to work on the repository, or call `submit` when done."


class ExampleStep(BaseModel):
    """A tool's output in a worked example, and the assistant's next reply."""

    model_config = ConfigDict(extra="forbid")
    output: str = Field(description="what the previous reply's tool call answered")
    reply: str = Field(description="the assistant's next reply")


class WorkedExample(BaseModel):
    """An issue and the replies that solve it, shown to the model as earlier turns before its task."""

    model_config = ConfigDict(extra="forbid")
    issue: str = Field(description="a problem statement, shown through `prompt` as the task's is")
    reply: str = Field(description="the assistant's reply to it, e.g. the tool call that fixes it")
    steps: list[ExampleStep] = Field(
        default_factory=list, description="then, turn by turn: a tool's output and the next reply (an exploration)"
    )


class SWELoopOptions(LoopOptions):
    """`agent.kwargs` of the SWE loop."""

    prompt: str = Field(PROMPT, description="user message; {problem_statement} and {repo_dir} are filled in")
    examples: list[WorkedExample] = Field(
        default_factory=list, description="worked examples before the task (prompt tokens, never trained on)"
    )
    time_budget_s: float | None = Field(None, gt=0, description="wall-clock budget of the turns (stop: time_budget)")
    on_no_tool_call: Literal["remind", "stop"] = Field("remind", description="remind the model, or end")
    reminder: str = Field(NO_TOOL_CALL, description="on_no_tool_call=remind: what a reply that calls no tool is told")
    repeated_call: str | None = Field(
        None,
        description="what a reply is told, instead of its calls being run, when it repeats its previous reply's calls "
        "exactly (counted as a tool error); None runs them again",
    )
    issue: Literal["given", "failing_test"] = Field(
        "given",
        description="the issue shown: the task's problem statement, or only the failing test's name (the agent has to "
        "run it to learn more; with tests_visible)",
    )
    tests_visible: bool = Field(
        False,
        description="the test patch's files are committed in the agent's repository, so it can run the failing tests "
        "(grading puts them back from the test patch in a fresh container, so editing them changes nothing)",
    )
    patch_timeout_s: float = Field(60.0, gt=0, description="timeout of taking the diff out")


class SWEAgentLoop(SteppedLoop):
    """Resolve a SWE-bench-format task with sandboxed tools; the diff lands in `metadata["model_patch"]`.

    The sample carries the task (its SWE-bench columns, as `agentrl.data` loads them into `extra_info`).
    Container limits come from the run's `sandbox:` section (memory, cpus, timeouts); its `backend` may stay
    `none`, since the loop starts each task's container itself from the task's image.

    Its episodes fork (`rollout.tree`): each child gets a container holding the parent's repository as it is at
    the fork (files, not processes: `FORK_NOTE`), the tools over it, and what is left of the time budget.
    """

    Options = SWELoopOptions

    @classmethod
    def prepare(cls, cfg: AgentRLConfig, samples: list[Sample]) -> None:
        """Build the images of the run's tasks that this machine lacks (`agentrl.swe.prepare`)."""
        from agentrl.swe.prepare import prepare_task_images

        prepare_task_images(samples)

    @classmethod
    def check_case(cls) -> LoopCheckCase:
        """A SWE task's container: a recipe's task (`agentrl check loop=swe_agent recipe=swe_easy`, played through
        `recipe_check_case`) or a case of the caller's (`check_loop(..., case=...)`)."""
        return LoopCheckCase(needs=frozenset({"docker"}), lacks="a SWE task (its sample, tools and container image)")

    @classmethod
    def recipe_check_case(cls, cfg: AgentRLConfig, sample: Sample) -> LoopCheckCase:
        """The recipe's task, answered with the edit its gold patch makes where the run offers `edit_line` and the
        patch changes one line (swe_easy's typos: the tool runs in the task's container), else with a reply that
        calls no tool."""
        case = super().recipe_check_case(cfg, sample)
        edit = gold_edit_call(cfg, SWETask.from_sample(sample))
        if edit is None:
            return replace(case, reply="I am done.")
        room = max(cfg.rollout.max_tokens, len(edit.encode()) + 1)  # a token is a byte or more; then the EOS
        return replace(
            case, reply=edit, config={**case.config, "rollout": {**case.config["rollout"], "max_tokens": room}}
        )

    options: SWELoopOptions
    uses_tools = True
    compacts_context = True  # agent.context: a long episode goes on in a rewritten conversation

    def __init__(self, config: AgentConfig | None = None, **kwargs: Any):
        super().__init__(config, **kwargs)
        self.parser = get_parser(self.config.tool_parser)

    async def begin(self, sample: Sample, ctx: AgentContext) -> SWEState:
        task = SWETask.from_sample(sample)
        if self.options.tests_visible and task.test_patch.strip():
            task = task.model_copy(update={"start_patch": _joined(task.start_patch, task.test_patch)})
        traj = ctx.trajectory
        traj.metadata.update({"instance_id": task.instance_id, "model_patch": ""})
        tools = require_tools(ctx, "swe_agent")
        ctx.start(self._prompt_messages(task))
        started = time.perf_counter()
        sandbox, base = await open_swe_sandbox(task, self._sandbox_config(), run_id=f"swe-{traj.id[:8]}")
        _add_time(traj, "sandbox_setup_s", started)
        ctx.sandbox = tools.sandbox = sandbox
        traj.metadata["base_commit"] = base
        budget = self.options.time_budget_s
        deadline = None if budget is None else asyncio.get_running_loop().time() + budget
        return SWEState(task, base, OwnedResources(sandbox), deadline)

    def _prompt_messages(self, task: SWETask) -> list[Message]:
        """The worked examples as earlier turns, then the task's issue."""
        messages: list[Message] = []
        for example in self.options.examples:
            issue = self.options.prompt.format(problem_statement=example.issue, repo_dir=work_repo(task))
            messages += [Message(role="user", content=issue), Message(role="assistant", content=example.reply)]
            for step in example.steps:
                messages += [Message(role="tool", content=step.output), Message(role="assistant", content=step.reply)]
        statement = failing_test_statement(task) if self.options.issue == "failing_test" else task.problem_statement
        issue = self.options.prompt.format(problem_statement=statement, repo_dir=work_repo(task))
        return [*messages, Message(role="user", content=issue)]

    async def step(self, ctx: AgentContext, state: SWEState) -> bool:
        try:
            async with asyncio.timeout_at(state.deadline):
                done = await self._turn(ctx, state)
            if not done and state.deadline is not None and asyncio.get_running_loop().time() >= state.deadline:
                raise TimeoutError  # spent during the turn: end here rather than fork an episode out of time
            return done
        except TimeoutError:
            ctx.trajectory.stop_reason = StopReason.TIME_BUDGET
            ctx.trajectory.error = f"time budget of {self.options.time_budget_s:g}s spent"
            return True

    async def _turn(self, ctx: AgentContext, state: SWEState) -> bool:
        turn = await ctx.generate()
        parsed = self.parser.parse(turn.text)
        errors = parsed.errors
        if not parsed.calls and not parsed.errors:
            if self.options.on_no_tool_call == "stop":
                ctx.finish()
                return True
            errors = [self.options.reminder.removeprefix("Error: ")]
        calls, asked = parsed.calls, [(c.name, c.arguments) for c in parsed.calls]
        if calls and self.options.repeated_call is not None and asked == state.previous_calls:
            calls, errors = [], [*errors, self.options.repeated_call.removeprefix("Error: ")]
        state.previous_calls = asked
        results = await execute_calls(ctx, calls, errors, self.config.max_parallel_tool_calls)
        submitted = [r for r in results if r.metadata.get("submitted")]
        if submitted:
            record_final_calls(ctx, results)
            ctx.trajectory.stop_reason = StopReason.DONE
            ctx.trajectory.metadata["submission"] = submitted[0].metadata.get("answer", "")
            return True
        answer_calls(ctx, results)
        return False

    async def end(self, ctx: AgentContext, state: SWEState) -> None:
        """Take the diff out (also when a budget ended the episode), then remove the container."""
        traj = ctx.trajectory
        try:
            extracted = time.perf_counter()
            traj.metadata["model_patch"] = await extract_patch(
                state.sandbox, state.task, state.base, self.options.patch_timeout_s
            )
            _add_time(traj, "patch_extract_s", extracted)
        finally:
            ctx.sandbox = None
            closing = time.perf_counter()
            await state.release()
            _add_time(traj, "sandbox_close_s", closing)
        traj.metrics["swe/patch_lines"] = float(_changed_lines(traj.metadata["model_patch"]))

    async def fail(self, ctx: AgentContext, state: SWEState) -> None:
        """After an error no diff is taken out (the trajectory is not trained on): the container is removed."""
        ctx.sandbox = None
        await state.release()

    async def fork_state(self, state: SWEState, children: list[AgentContext]) -> list[SWEState]:
        """Each child gets a fork of the container (the repository as it is now; no processes), the tools over it
        (`ToolSet.fork`) and the parent's deadline."""
        owned = await fork_sandbox_and_tools(state.sandbox, children)
        calls = state.previous_calls
        return [SWEState(state.task, state.base, resources, state.deadline, list(calls)) for resources in owned]

    async def discard(self, state: SWEState) -> None:
        await state.release()

    async def prepare_fork(self, ctx: AgentContext, state: SWEState, children: int) -> None:
        await state.sandbox.prepare_forks(children)

    def _sandbox_config(self) -> SandboxConfig:
        return self.run_config.sandbox if self.run_config is not None else SandboxConfig(backend="docker")


@dataclass
class SWEState:
    """What the SWE loop keeps between turns: the task, its base commit, the container and tools the episode owns
    (the root owns its container; a fork, its container and tools) and the time budget's deadline (event-loop
    time)."""

    task: SWETask
    base: str
    owned: OwnedResources
    deadline: float | None = None
    previous_calls: list[tuple[str, Any]] = field(default_factory=list)
    """The calls of the model's last reply (`repeated_call`), as (name, arguments)."""

    @property
    def sandbox(self) -> Sandbox:
        assert self.owned.sandbox is not None
        return self.owned.sandbox

    async def release(self) -> None:
        """Remove the container and free the fork's tools; calling it again does nothing."""
        await self.owned.release()


async def open_swe_sandbox(
    task: SWETask, config: Any, run_id: str, mounts: list[Any] | None = None
) -> tuple[Sandbox, str]:
    """`open_task_sandbox`, shielded: a trajectory cancelled while its container starts still removes it."""
    extra = {"mounts": mounts} if mounts else {}  # only a harness's container mounts anything
    opening = asyncio.ensure_future(open_task_sandbox(task, config, run_id=run_id, **extra))
    try:
        return await asyncio.shield(opening)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            sandbox, _ = await opening
            await sandbox.close()
        raise


def gold_edit_call(cfg: AgentRLConfig, task: SWETask) -> str | None:
    """The `edit_line` call that makes the task's gold fix, in the run's tool-call format; None where the run offers
    no `edit_line` or the gold patch changes more than one line."""
    fix = one_line_fix(task.patch)
    if fix is None or not any(tool.class_ == "edit_line" for tool in cfg.tools):
        return None
    arguments = {"path": fix.path, "line": fix.line, "old": fix.old, "new": fix.new}
    return get_parser(cfg.agent.tool_parser).format_calls([ToolCall("call_0", "edit_line", arguments)])


def failing_test_statement(task: SWETask) -> str:
    """An issue that names the first failing test and how many others fail with it; never the traceback.

    Raises:
        TaskError: the task lists no failing test.
    """
    if not task.FAIL_TO_PASS:
        raise TaskError(f"{task.instance_id} lists no FAIL_TO_PASS test: agent.kwargs.issue=failing_test needs one")
    first, others = task.FAIL_TO_PASS[0], len(task.FAIL_TO_PASS) - 1
    also = f" ({others} other test{'s' if others > 1 else ''} of the suite fail{'' if others > 1 else 's'} too)"
    return f"The test `{first}` fails{also if others else ''}. Find the bug in the package's code and fix it."


def _joined(*patches: str) -> str:
    """Diffs one after the other, as one diff `git apply` takes."""
    return "".join(p if p.endswith("\n") else p + "\n" for p in patches if p.strip())


def _add_time(traj: Trajectory, key: str, started: float) -> None:
    traj.timings[key] = traj.timings.get(key, 0.0) + time.perf_counter() - started


def _changed_lines(patch: str) -> int:
    return sum(
        1 for line in patch.splitlines() if line[:1] in "+-" and not line.startswith(("+++", "---")) and line != ""
    )
