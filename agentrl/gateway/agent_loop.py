"""`agent.name=openai_agent`: train an existing agent unchanged, through the gateway.

Each trajectory gets a gateway session (`agentrl.gateway`): an OpenAI base URL that records every call token-exactly
and enforces the trajectory's budgets. The agent is either a Python callable
(`agent.kwargs.entry_point=pkg.mod:run`, sync or async) called as

    run(base_url=..., model=..., sample=..., sandbox=...)   # sandbox: the trajectory's, or None

or a command (`agent.kwargs.command="python my_agent.py"`) run with `OPENAI_BASE_URL`, `OPENAI_API_KEY`,
`OPENAI_MODEL` and `AGENTRL_SAMPLE` (the row as JSON) in its environment, or a harness (`agent.kwargs.harness`:
`claude_code`, `codex`; `agentrl.harnesses`) run unchanged inside the task's own container, whose only way out is
the gateway. Its return value (or stdout) is kept in `trajectory.metadata["agent_result"]` for rewards to read.

The trajectory is the session's last step sample; when the agent rewrote its history, the earlier step samples
ride along in `trajectory.earlier_steps` and train with the same advantage. An agent that raises (or a command
that exits non-zero) keeps what it generated, with stop reason `error` (a failure: counted, not trained on by
default); a budget the gateway enforced sets its own stop reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import signal
from collections.abc import AsyncIterator
from typing import Any, Literal

from pydantic import Field, model_validator

from agentrl.config.policies import policy_config, trainable_policies
from agentrl.config.schema import AgentRLConfig
from agentrl.gateway import Gateway, GatewaySession, SessionLimits
from agentrl.harnesses.builtin import get_harness
from agentrl.harnesses.install import prepare_harness
from agentrl.harnesses.run import (
    SOCKET_NAME,
    HarnessFailed,
    harness_mounts,
    harness_socket_dir,
    run_harness,
    session_url,
)
from agentrl.harnesses.spec import Launch
from agentrl.loops.base import AgentLoopBase, LoopOptions
from agentrl.loops.conformance.case import LoopCheckCase
from agentrl.loops.context import AgentContext
from agentrl.registry import import_object
from agentrl.sandbox.blocking import BlockingSandbox
from agentrl.tools.threads import run_in_daemon_thread
from agentrl.types import Sample, StopReason, Trajectory

DEADLINE_GRACE_S = 5.0
"""The agent runs this long past `timeout_s` before it is cancelled: the gateway refuses its calls first."""
RESULT_CHARS = 20_000
"""Stdout of a command agent kept as its result, at most (the tail)."""
HARNESS_TIMEOUT_S = 1800.0
"""A harness's run without `agent.kwargs.timeout_s`: long, but not forever (it runs in a container)."""


class OpenAIAgentOptions(LoopOptions):
    entry_point: str | None = Field(None, description="the agent as a callable, 'pkg.mod:run' or 'file.py:run'")
    command: str | None = Field(None, description="the agent as a shell command (run in the working directory)")
    model_name: str = Field("policy", description="the model id the agent is told to use")
    timeout_s: float | None = Field(None, gt=0, description="wall-clock budget of one agent run (time_budget)")
    env: dict[str, str] = Field(default_factory=dict, description="extra environment of a command agent or harness")
    honour_request_sampling: bool = Field(
        False,
        description="take the agent's own temperature/top_p/top_k/seed; while training, a request the trainer "
        "could not train exactly (temperature 0; top_p < 1 or top_k > 0 without trainer.tis_cap) is refused with "
        "a 400",
    )
    task_sandbox: Literal["run", "swe_task"] = Field(
        "run",
        description="the agent's sandbox: the run's (`sandbox.backend`), or each SWE task's own container "
        "(its diff then lands in metadata['model_patch'] for the swe_tests reward)",
    )
    harness: Literal["claude_code", "codex"] | None = Field(
        None,
        description="an agent harness run unchanged in the task's container (task_sandbox=swe_task), its only way "
        "out the gateway: claude_code (Messages API) or codex (Responses API); docs/guides/harnesses.md",
    )
    harness_args: list[str] = Field(default_factory=list, description="extra command-line arguments of the harness")
    harness_prompt: str = Field(
        "{prompt}", description="what the harness is asked: `{prompt}` is the row's user text (the task's issue)"
    )

    @model_validator(mode="after")
    def _one_agent(self) -> OpenAIAgentOptions:
        if sum(x is not None for x in (self.entry_point, self.command, self.harness)) != 1:
            raise ValueError(
                "set exactly one of agent.kwargs.entry_point (a callable), agent.kwargs.command or agent.kwargs.harness"
            )
        if self.harness is not None and self.task_sandbox != "swe_task":
            raise ValueError(
                f"agent.kwargs.harness={self.harness} runs in the task's own container: set "
                "agent.kwargs.task_sandbox=swe_task (the rows must be SWE tasks)"
            )
        return self


class OpenAIAgentLoop(AgentLoopBase):
    """Runs a user's OpenAI-speaking agent per trajectory against its own gateway session."""

    Options = OpenAIAgentOptions
    no_compaction_reason = "a gateway agent compacts its own history (each rewrite already starts a new step sample)"

    @classmethod
    def check_case(cls) -> LoopCheckCase:
        """Two chat turns of an `openai` SDK agent (`agentrl.gateway.check_agent`)."""
        config = {"agent": {"kwargs": {"entry_point": "agentrl.gateway.check_agent:two_turns"}}}
        return LoopCheckCase(config=config, reply="Hello.", min_turns=2)

    @classmethod
    def prepare(cls, cfg: AgentRLConfig, samples: list[Sample]) -> None:
        """With `task_sandbox=swe_task`: build the images of the run's tasks that this machine lacks."""
        if cfg.agent.kwargs.get("task_sandbox") == "swe_task":
            from agentrl.swe.prepare import prepare_task_images

            prepare_task_images(samples)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._gateway: Gateway | None = None
        self._gateway_lock: asyncio.Lock | None = None
        self._open = 0
        self._harness_ready: asyncio.Task[str] | None = None
        self._socket_dir = harness_socket_dir() if self._harness_name() else None

    def _harness_name(self) -> str | None:
        """The agentrl harness run in the task's container (`agent.kwargs.harness`), if any."""
        return self.options.harness

    async def run(self, sample: Sample, ctx: AgentContext) -> Trajectory:
        options: OpenAIAgentOptions = self.options
        # the sandbox opens first, so a task container's start does not count against the agent's time budget
        async with self._sandbox(sample, ctx), self._session(ctx) as session:
            deadline = asyncio.timeout(self._deadline(options))
            try:
                async with deadline:
                    result = await self._run_agent(session, sample, ctx)
                ctx.trajectory.metadata["agent_result"] = result
                stop, error = StopReason.DONE, None
            except TimeoutError as exc:
                if not deadline.expired():  # the agent's own timeout (a tool, an HTTP call): its failure
                    stop, error = StopReason.ERROR, f"the agent raised {type(exc).__name__}: {exc}"
                else:
                    session.end(StopReason.TIME_BUDGET, f"the agent ran past its {options.timeout_s:g} s budget")
                    stop, error = StopReason.TIME_BUDGET, None
            except Exception as exc:  # the agent's own failure: keep what it generated
                stop, error = StopReason.ERROR, f"the agent raised {type(exc).__name__}: {exc}"
        return self._trajectory(ctx, session, session.stop_reason or stop, error)

    def _deadline(self, options: OpenAIAgentOptions) -> float | None:
        return None if options.timeout_s is None else options.timeout_s + DEADLINE_GRACE_S

    async def _run_agent(self, session: GatewaySession, sample: Sample, ctx: AgentContext) -> Any:
        options: OpenAIAgentOptions = self.options
        if options.harness is not None:
            return await self._run_harness(options, session, sample, ctx)
        if options.command is not None:
            return await self._run_command(options, session, sample)
        agent = import_object(options.entry_point or "", "agent entry point")
        kwargs = {"base_url": session.base_url, "model": options.model_name, "sample": sample, "sandbox": ctx.sandbox}
        if inspect.iscoroutinefunction(agent):
            return await agent(**kwargs)
        if ctx.sandbox is not None:  # a sync agent runs in a thread: it gets blocking calls into the sandbox
            kwargs["sandbox"] = BlockingSandbox(ctx.sandbox, asyncio.get_running_loop())
        # its own thread, not the loop's small shared executor: hundreds of agents run at once, and one the
        # time budget abandons must not hold a slot the others need
        result = await run_in_daemon_thread(agent, **kwargs)
        return await result if inspect.isawaitable(result) else result

    async def _run_command(self, options: OpenAIAgentOptions, session: GatewaySession, sample: Sample) -> str:
        env = {
            **os.environ,
            **options.env,
            "OPENAI_BASE_URL": session.base_url,
            "OPENAI_API_KEY": "agentrl",
            "OPENAI_MODEL": options.model_name,
            "AGENTRL_SAMPLE": sample.model_dump_json(),
        }
        process = await asyncio.create_subprocess_shell(
            options.command or "",
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # its own process group: a budget kills the agent and what it started
        )
        try:
            stdout, stderr = await process.communicate()
        except asyncio.CancelledError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            await asyncio.shield(process.wait())
            raise
        if process.returncode != 0:
            tail = stderr.decode(errors="replace")[-2000:]
            raise RuntimeError(f"`{options.command}` exited with {process.returncode}: {tail}")
        return stdout.decode(errors="replace")[-RESULT_CHARS:]

    async def _run_harness(
        self, options: OpenAIAgentOptions, session: GatewaySession, sample: Sample, ctx: AgentContext
    ) -> str:
        assert options.harness is not None and ctx.sandbox is not None
        text = "\n\n".join(str(m.content) for m in sample.prompt if m.role == "user" and m.content)
        prompt = options.harness_prompt.replace("{prompt}", text)
        launch = Launch(prompt, options.model_name, session_url(session.id), tuple(options.harness_args))
        timeout = options.timeout_s or HARNESS_TIMEOUT_S
        try:
            harness = get_harness(options.harness)
            return await run_harness(harness, ctx.sandbox, launch, timeout, ctx.sandbox.workdir, options.env)
        except HarnessFailed as exc:
            calls = session.recorder.calls
            if exc.gave_up and calls and calls[-1].finish_reason == "length":
                # the harness gives up on a reply cut at its token budget: the model's ending, trained on as one;
                # stopped from outside (a timeout, a signal, out of memory) it is a failure like any other
                session.end(StopReason.MAX_TOKENS, f"the last reply was cut at its token budget and {exc}")
                return str(exc)
            raise

    async def _prepared_harness(self) -> list[Any]:
        """The mounts of a harness's container, its volume built once per loop (in a thread: it is Docker work)."""
        name = self._harness_name()
        if name is None:
            return []
        harness = get_harness(name)
        if self._harness_ready is None:
            self._harness_ready = asyncio.ensure_future(asyncio.to_thread(prepare_harness, harness))
        await asyncio.shield(self._harness_ready)
        assert self._socket_dir is not None
        return harness_mounts(harness, self._socket_dir)

    @contextlib.asynccontextmanager
    async def _sandbox(self, sample: Sample, ctx: AgentContext) -> AsyncIterator[None]:
        """With `task_sandbox=swe_task`: the task's own container as `ctx.sandbox`, its diff taken out after."""
        if self.options.task_sandbox != "swe_task":
            yield
            return
        from agentrl.config.schema import SandboxConfig
        from agentrl.loops.swe import open_swe_sandbox
        from agentrl.swe.repo import extract_patch
        from agentrl.swe.task import SWETask

        task = SWETask.from_sample(sample)
        traj = ctx.trajectory
        traj.metadata.update({"instance_id": task.instance_id, "model_patch": ""})
        config = self.run_config.sandbox if self.run_config is not None else SandboxConfig(backend="docker")
        mounts = await self._prepared_harness()
        sandbox, base = await open_swe_sandbox(task, config, run_id=f"swe-{traj.id[:8]}", mounts=mounts)
        ctx.sandbox = sandbox
        traj.metadata["base_commit"] = base
        try:
            yield
            traj.metadata["model_patch"] = await extract_patch(sandbox, task, base)
        finally:
            ctx.sandbox = None
            await asyncio.shield(sandbox.close())

    @contextlib.asynccontextmanager
    async def _session(self, ctx: AgentContext) -> AsyncIterator[GatewaySession]:
        """A session on this loop's gateway, which runs while any trajectory has one open."""
        gateway = await self._acquire(ctx)
        options: OpenAIAgentOptions = self.options
        budgets = ctx.budgets
        limits = SessionLimits(
            max_turns=budgets.max_turns,
            max_tokens_per_turn=budgets.max_tokens_per_turn,
            max_total_tokens=min(budgets.max_total_tokens, budgets.max_model_len),
            max_wall_s=options.timeout_s,
        )
        session = gateway.open_session(
            ctx.trajectory.id,
            sampling=ctx.sampling,
            limits=limits,
            honour_request_sampling=options.honour_request_sampling,
            # a training run refuses rollout.temperature=0 at start, and held-out evaluation runs the loop greedily:
            # a greedy run's replies are an evaluation's, never trained on
            trains=ctx.sampling.temperature > 0,
            truncation_corrected=corrects_truncation(self.run_config),
            resume_aborted=ctx.resume_aborted,
        )
        try:
            yield session
        finally:
            gateway.close_session(session)
            await self._release()

    async def _acquire(self, ctx: AgentContext) -> Gateway:
        if self._gateway_lock is None:
            self._gateway_lock = asyncio.Lock()
        async with self._gateway_lock:
            if self._gateway is None:
                name, parser = self.options.model_name, self.config.tool_parser
                socket = f"{self._socket_dir}/{SOCKET_NAME}" if self._socket_dir else None
                gateway = Gateway(ctx.llm, ctx.tokenizer, model_name=name, tool_parser=parser, unix_socket=socket)
                await gateway.start()
                self._gateway = gateway
            self._open += 1
            return self._gateway

    async def _release(self) -> None:
        assert self._gateway_lock is not None
        async with self._gateway_lock:
            self._open -= 1
            if self._open != 0 or self._gateway is None:
                return
            gateway, self._gateway = self._gateway, None
        await gateway.stop()  # outside the lock: a trajectory starting meanwhile opens a new gateway at once

    def _trajectory(
        self, ctx: AgentContext, session: GatewaySession, stop: StopReason, error: str | None
    ) -> Trajectory:
        """`ctx.trajectory` filled from the session: its last step sample, the earlier ones alongside."""
        traj = ctx.trajectory
        recorder = session.recorder
        steps = recorder.generated_steps  # a step sample whose only call was refused holds nothing to train on
        if steps:
            *earlier, last = steps
            # copies: the session is closed, but the trajectory must not share lists with anything still live
            traj.segments, traj.messages = [s.model_copy(deep=True) for s in last.segments], list(last.messages)
            traj.earlier_steps = earlier
            traj.num_turns = sum(1 for call in recorder.calls if call.output_ids)
        if not steps and recorder.calls:  # every call refused or failed: saved and counted, never trained on
            stop, error = StopReason.ERROR, error or session.unanswered()
        elif not steps:
            stop = StopReason.ERROR if stop == StopReason.DONE else stop
            error = error or "the agent made no chat call through its base URL"
        traj.stop_reason, traj.error = stop, error
        traj.metrics.update(session.metrics)
        traj.metrics["gateway/calls"] = float(len(recorder.calls))
        traj.metrics["gateway/step_samples"] = float(len(steps))
        traj.metrics["gateway/prefix_reuse_rate"] = recorder.prefix_reuse_rate
        traj.metrics["loop/template_rewrites"] = float(recorder.template_rewrites)
        traj.metadata["gateway_calls"] = [
            {"step": c.step, "prefix_matched": c.prefix_matched, "finish_reason": c.finish_reason}
            for c in recorder.calls
        ]
        return traj


def corrects_truncation(cfg: AgentRLConfig | None) -> bool:
    """Whether the trainer corrects truncated sampling (`trainer.tis_cap`) for every policy that learns, so that an
    agent's `top_p` < 1 or `top_k` > 0 can be trained."""
    if cfg is None:
        return False
    return all(policy_config(cfg, name).trainer.tis_cap is not None for name in trainable_policies(cfg))


def sample_from_env() -> dict[str, Any]:
    """The dataset row a command agent runs on (`AGENTRL_SAMPLE`), for agents written as scripts."""
    return json.loads(os.environ.get("AGENTRL_SAMPLE", "{}"))
