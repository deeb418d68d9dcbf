"""RolloutManager: runs many agent loops concurrently and streams their trajectories as they finish.

All trajectories of a call (planned by `agentrl.loops.jobs`) share one queue and one concurrency cap (no static
per-worker chunks), so a slow trajectory never holds back a batch of fast ones. A failing loop becomes a trajectory
with its error and stop reason (classified by the exception's type: `sandbox_error`, `server_error`, else
`error`); it never cancels its siblings.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from tqdm.auto import tqdm

from agentrl.config.schema import AgentConfig, AgentRLConfig, ContextConfig, RolloutConfig
from agentrl.loops.base import AgentLoopBase, get_loop_class
from agentrl.loops.compaction.manager import ContextManager
from agentrl.loops.context import AgentContext, Budgets, StopLoop
from agentrl.loops.failures import fail_trajectory, stop_reason_for
from agentrl.loops.jobs import Job, JobRunner, trajectory_seed  # noqa: F401 (trajectory_seed: this module's API)
from agentrl.loops.protocols import TokenGenerator, Tokenizer
from agentrl.loops.tree import TreeShape, run_tree
from agentrl.rollout.protocol import SamplingParams
from agentrl.types import Sample, StopReason, Trajectory

ContextHook = Callable[[AgentContext], Any]


class RolloutManager(JobRunner):
    """Runs `n` trajectories per sample through their agent loops.

    Args:
        llm: the rollout client (token ids in, token ids and logprobs out).
        tokenizer: the policy's tokenizer (chat template included).
        agent: loop config; a sample's `agent_name` overrides `agent.name`.
        rollout: sampling, `n`, `max_concurrency`, per-trajectory timeout.
        setup_context: optional async/sync hook called on each new context (attach tools, sandbox, env).
        teardown_context: optional hook called when a trajectory ends, even on failure (release resources).
        show_progress: draw a progress bar.
        run_config: the whole run's `AgentRLConfig`, set on each loop as `loop.run_config` (for loops that read
            sections other than `agent:`, e.g. `env:`).
    """

    def __init__(
        self,
        llm: TokenGenerator,
        tokenizer: Tokenizer,
        agent: AgentConfig | None = None,
        rollout: RolloutConfig | None = None,
        setup_context: ContextHook | None = None,
        teardown_context: ContextHook | None = None,
        show_progress: bool = False,
        run_config: AgentRLConfig | None = None,
    ):
        self.llm = llm
        self.tokenizer = tokenizer
        self.agent = agent or AgentConfig()
        self.rollout = rollout or RolloutConfig()
        self.setup_context = setup_context
        self.last_completed: float | None = None
        """`time.monotonic()` when a trajectory last finished (the trainer's watchdog reads it)."""
        self.teardown_context = teardown_context
        self.show_progress = show_progress
        self.run_config = run_config
        self._loops: dict[str, AgentLoopBase] = {}

    async def stream(
        self, samples: list[Sample], n: int | None = None, seed: int | None = None
    ) -> AsyncIterator[Trajectory]:
        """Yield trajectories in completion order; closing the iterator cancels the unfinished ones.

        With a `seed` (else `rollout.seed`), every trajectory samples with its own seed derived from it and its
        (sample position, sample index), and each turn from that: the same call gives the same trajectories on
        a server that honours seeds.
        """
        jobs: asyncio.Queue[Job] = asyncio.Queue()
        for job in self.plan(samples, n, seed):
            jobs.put_nowait(job)
        done: asyncio.Queue[list[Trajectory]] = asyncio.Queue()
        total = jobs.qsize()
        slots = min(self.rollout.max_concurrency, total)
        workers = [asyncio.create_task(self._worker(jobs, done)) for _ in range(slots)]
        unit = "tree" if self.rollout.tree.enabled else "traj"
        bar = tqdm(total=total, desc="rollout", disable=not self.show_progress, unit=unit)
        try:
            for _ in range(total):
                finished = await done.get()
                bar.update(1)
                for traj in finished:
                    yield traj
        finally:
            bar.close()
            for w in workers:
                w.cancel()
            await asyncio.gather(*workers, return_exceptions=True)

    async def _worker(self, jobs: asyncio.Queue[Job], done: asyncio.Queue[list[Trajectory]]) -> None:
        task = asyncio.current_task()
        while not jobs.empty():
            job = jobs.get_nowait()
            if task is not None:  # a stall report (agentrl.trainer.watchdog) names the episode each slot runs
                task.set_name(f"trajectory {job.sample.id} #{job.sample_index}")
            await done.put(await self.run_job_leaves(job))

    async def run_job(self, job: Job) -> Trajectory:
        """Run one planned job (with this manager's sampling settings)."""
        return await self.run_one(
            job.sample, group_id=job.group_id, sample_index=job.sample_index, position=job.position, seed=job.seed
        )

    async def run_job_leaves(self, job: Job) -> list[Trajectory]:
        """Run one planned job: its trajectory, or with `rollout.tree` the leaves of its tree."""
        if not self.rollout.tree.enabled:
            return [await self.run_job(job)]
        return await self._run(job.sample, job.group_id, job.sample_index, job.position, job.seed, tree=True)

    async def run_one(
        self, sample: Sample, group_id: str = "", sample_index: int = 0, position: int = 0, seed: int | None = None
    ) -> Trajectory:
        """Run one trajectory; never raises for loop failures (they are recorded on the trajectory).

        `seed` seeds its sampling (each turn gets `seed + turn`); None samples unseeded.
        """
        (traj,) = await self._run(sample, group_id, sample_index, position, seed, tree=False)
        return traj

    async def _run(
        self, sample: Sample, group_id: str, sample_index: int, position: int, seed: int | None, tree: bool
    ) -> list[Trajectory]:
        """One episode (or, with `tree`, one tree of them: its leaves); loop failures are recorded, not raised."""
        name = sample.agent_name or self.agent.name
        traj = Trajectory(group_id=group_id, sample_index=sample_index, agent_name=name)
        traj.metadata.update({"sample_id": sample.id, "sample_position": position, "data_source": sample.data_source})
        started = time.perf_counter()
        ctx: AgentContext | None = None
        leaves = [traj]
        try:
            async with asyncio.timeout(self.rollout.trajectory_timeout_s):
                loop = self._loop(name)
                ctx = self._context(sample, traj, seed, loop)
                if self.setup_context:
                    await _maybe_await(self.setup_context(ctx))
                if tree:
                    leaves = await run_tree(loop, sample, ctx, TreeShape.of(self.rollout.tree))
                else:
                    leaves = [await loop.run(sample, ctx)]
        except StopLoop as stop:
            traj.stop_reason = stop.reason
        except TimeoutError:
            fail_trajectory(traj, StopReason.TIMEOUT, f"trajectory exceeded {self.rollout.trajectory_timeout_s}s")
        except asyncio.CancelledError:
            fail_trajectory(traj, StopReason.ABORTED, "cancelled")
            raise
        except Exception as exc:  # one bad loop never kills the batch
            fail_trajectory(traj, stop_reason_for(exc), f"{type(exc).__name__}: {exc}")
        finally:
            await self._teardown(ctx, traj)
            for leaf in leaves:
                leaf.timings["total_s"] = time.perf_counter() - started
        for leaf in leaves:
            if leaf.stop_reason is None:
                leaf.stop_reason = StopReason.DONE
        self.last_completed = time.monotonic()
        return leaves

    def loop(self, name: str) -> AgentLoopBase:
        """The loop that plays `name`'s episodes (built on first use)."""
        return self._loop(name)

    async def open_context(self, sample: Sample, traj: Trajectory) -> AgentContext:
        """A context for playing `sample` into `traj` by hand, as `run_one` builds it (sampling, budgets, and the
        setup hook's tools and sandbox); pair it with `close_context`."""
        ctx = self._context(sample, traj, loop=self._loop(sample.agent_name or self.agent.name))
        if self.setup_context:
            await _maybe_await(self.setup_context(ctx))
        return ctx

    async def close_context(self, ctx: AgentContext) -> None:
        """Release what the setup hook attached to `ctx` (its teardown hook), as `run_one` does at the end."""
        await self._teardown(ctx, ctx.trajectory)

    def use_loop(self, name: str, loop: AgentLoopBase) -> None:
        """Play `name`'s episodes with `loop`, an instance the caller built (`check_loop` checks a class that may be
        registered under no name), instead of the registered class."""
        loop.run_config = loop.run_config or self.run_config
        self._loops[name] = loop

    def _loop(self, name: str) -> AgentLoopBase:
        if name not in self._loops:
            loop = get_loop_class(name)(self.agent)
            loop.run_config = self.run_config
            self._loops[name] = loop
        return self._loops[name]

    def _context(
        self, sample: Sample, traj: Trajectory, seed: int | None = None, loop: AgentLoopBase | None = None
    ) -> AgentContext:
        r = self.rollout
        sampling = SamplingParams(
            temperature=r.temperature, top_p=r.top_p, top_k=r.top_k, max_tokens=r.max_tokens, seed=seed
        )
        budgets = Budgets(
            max_turns=self.agent.max_turns,
            max_tokens_per_turn=r.max_tokens,
            max_total_tokens=self.agent.max_total_tokens,
            max_model_len=r.max_model_len,
            continue_cut_turns=self.agent.on_cut_turn == "continue",
        )
        return AgentContext(
            sample=sample,
            trajectory=traj,
            llm=self.llm,
            tokenizer=self.tokenizer,
            sampling=sampling,
            budgets=budgets,
            system_prompt=self.agent.system_prompt,
            resume_aborted=r.weight_update == "resume",
            context=context_manager(self.agent.context, loop),
        )

    async def _teardown(self, ctx: AgentContext | None, traj: Trajectory) -> None:
        if ctx is None or self.teardown_context is None:
            return
        try:
            await _maybe_await(self.teardown_context(ctx))
        except Exception as exc:
            traj.metadata["teardown_error"] = f"{type(exc).__name__}: {exc}"


def context_manager(config: ContextConfig, loop: AgentLoopBase | None) -> ContextManager | None:
    """The episode's context budget, when `agent.context.max_tokens` is set and the loop compacts (a loop that
    cannot is refused at start: `agentrl.loops.compaction.checks`)."""
    if config.max_tokens is None or loop is None or not type(loop).compacts_context:
        return None
    return ContextManager(config)


async def _maybe_await(value: Any) -> Any:
    if asyncio.iscoroutine(value):
        return await value
    return value
