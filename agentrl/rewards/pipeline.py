"""RewardPipeline: weighted, optionally gated components from config, applied to finished trajectories.

Declared in YAML as `reward.components: [{name: exact, type: normalized_match, weight: 1.0, ...kwargs}]` (see
`agentrl.rewards.hybrid` for gates, normalization and limits, `agentrl.rewards.registry` for types), plus an
optional verl-style `reward.function: pkg.module:compute_score` (a component named `compute_score`, weight 1).

The reward is `sum(weight_i * score_i)` over the components that produced a score. A component that raises,
times out or returns a non-finite score is recorded in the trajectory's `reward_details` and scores 0
(`on_failure: zero`) or is left out with the remaining weights scaled up to the full weight sum
(`on_failure: skip`); it never fails the batch. Components run concurrently, a gated one as soon as its gate
component is done; per-item components are bounded by their `max_concurrency`, batched ones (reward models,
encoders) get the whole batch in one call.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentrl.config.schema import RewardConfig
from agentrl.errors import UserError
from agentrl.rewards.aio import LoopSemaphore, run_sync
from agentrl.rewards.base import RewardError, RewardInput, RewardResult, final_answer
from agentrl.rewards.hybrid import ComponentSpec, Policy, parse_spec
from agentrl.types import Sample, Trajectory

logger = logging.getLogger(__name__)


@dataclass
class Outcome:
    """One component's result for one trajectory: `score` None means left out of the sum; `ok` False means
    the component failed or was gated off (which closes gates that depend on it)."""

    score: float | None
    details: dict[str, Any] = field(default_factory=dict)
    ok: bool = True


class RewardPipeline:
    """Scores trajectories with the weighted sum of the configured components.

    Use `await ascore(...)` / `await ascore_batch(...)` in async code; `score` / `score_batch` from sync code.
    """

    def __init__(self, config: RewardConfig):
        self.on_failure: Policy = config.on_failure
        self.components = [parse_spec(entry, i, self.on_failure) for i, entry in enumerate(_entries(config))]
        self.stages = _stages(self.components)
        self._limits = {c.name: LoopSemaphore(c.max_concurrency) for c in self.components}

    @property
    def total_weight(self) -> float:
        return sum(c.weight for c in self.components)

    # ---- public API --------------------------------------------------------------------------------------

    def score(self, trajectory: Trajectory, sample: Sample, sandbox: Any = None) -> float:
        """Set `reward`, `reward_components` and `reward_details` on the trajectory; return the reward.

        With no components configured, a reward the agent loop set itself is kept (0.0 when it set none).
        """
        return self.score_batch([trajectory], [sample], [sandbox])[0]

    def score_batch(
        self, trajectories: Sequence[Trajectory], samples: Sequence[Sample], sandboxes: Sequence[Any] | None = None
    ) -> list[float]:
        """Sync `ascore_batch`."""
        return run_sync(self.ascore_batch(trajectories, samples, sandboxes))

    async def ascore(self, trajectory: Trajectory, sample: Sample, sandbox: Any = None) -> float:
        """Async `score`."""
        return (await self.ascore_batch([trajectory], [sample], [sandbox]))[0]

    async def ascore_batch(
        self, trajectories: Sequence[Trajectory], samples: Sequence[Sample], sandboxes: Sequence[Any] | None = None
    ) -> list[float]:
        """Score a batch (batched components see it whole); sets each trajectory's reward fields, returns rewards.

        `sandboxes[i]`, when given, is the still-open sandbox of `trajectories[i]` (for `command` rewards).
        """
        if len(samples) != len(trajectories) or (sandboxes is not None and len(sandboxes) != len(trajectories)):
            raise UserError("ascore_batch needs one sample (and sandbox, when given) per trajectory")
        if not self.components:
            return [self._keep_loop_reward(t) for t in trajectories]
        boxes = list(sandboxes) if sandboxes is not None else [None] * len(trajectories)
        inps = [
            RewardInput(trajectory=t, sample=s, answer=final_answer(t, s), sandbox=b)
            for t, s, b in zip(trajectories, samples, boxes, strict=True)
        ]
        records: list[dict[str, Outcome]] = [{} for _ in inps]
        tasks: dict[str, asyncio.Future[None]] = {}

        async def run(spec: ComponentSpec) -> None:
            if spec.gate is not None:  # a gated component waits for its gate only, not for the whole stage
                await tasks[spec.gate.component]
            await self._run(spec, inps, records)

        for stage in self.stages:  # in dependency order, so a gate's task exists before its dependents'
            for spec in stage:
                tasks[spec.name] = asyncio.ensure_future(run(spec))
        await asyncio.gather(*tasks.values())
        return [self._combine(t, r) for t, r in zip(trajectories, records, strict=True)]

    async def aclose(self) -> None:
        """Free the components' resources (HTTP clients, models)."""
        for spec in self.components:
            await spec.component.aclose()

    # ---- running components ------------------------------------------------------------------------------

    async def _run(self, spec: ComponentSpec, inps: list[RewardInput], records: list[dict[str, Outcome]]) -> None:
        todo: list[int] = []
        for i, record in enumerate(records):
            gate = spec.gate
            if gate is None:
                todo.append(i)
                continue
            gate_outcome = record.get(gate.component)
            gate_score = gate_outcome.score if gate_outcome is not None else None
            if gate_outcome is not None and gate_outcome.ok and gate.opens(gate_score):
                todo.append(i)
            else:
                info = {"gated": True, "gate": gate.component, "gate_score": gate_score, "policy": gate.otherwise}
                record[spec.name] = Outcome(0.0 if gate.otherwise == "zero" else None, info, ok=False)
        if not todo:
            return
        if spec.component.batched:
            outcomes = await self._run_batch(spec, [inps[i] for i in todo])
        else:
            outcomes = await asyncio.gather(*(self._run_one(spec, inps[i]) for i in todo))
        for i, outcome in zip(todo, outcomes, strict=True):
            records[i][spec.name] = outcome

    async def _run_one(self, spec: ComponentSpec, inp: RewardInput) -> Outcome:
        async with self._limits[spec.name].get():
            started = time.perf_counter()
            try:
                async with asyncio.timeout(spec.timeout_s) as deadline:
                    result = await spec.component.ascore(inp)
                return self._success(spec, result, time.perf_counter() - started)
            except Exception as exc:
                return self._failure(spec, exc, time.perf_counter() - started, deadline.expired())

    async def _run_batch(self, spec: ComponentSpec, inps: list[RewardInput]) -> list[Outcome]:
        started = time.perf_counter()
        try:
            async with asyncio.timeout(spec.timeout_s) as deadline:
                results = await spec.component.ascore_batch(inps)
            if len(results) != len(inps):
                raise RewardError(f"{spec.type} returned {len(results)} results for {len(inps)} inputs")
        except Exception as exc:
            elapsed = time.perf_counter() - started
            return [self._failure(spec, exc, elapsed, deadline.expired()) for _ in inps]
        elapsed = (time.perf_counter() - started) / len(inps)
        return [self._success(spec, r, elapsed) for r in results]

    def _success(self, spec: ComponentSpec, result: RewardResult, elapsed: float) -> Outcome:
        details = dict(result.details)
        score = float(result.score)
        if not math.isfinite(score):
            reason = details.pop("error", None) or f"non-finite score {score}"
            return self._failure(spec, RewardError(str(reason), details), elapsed)
        if spec.normalize is not None:
            details["raw_score"] = score
            score = spec.normalize(score)
        details["elapsed_s"] = round(elapsed, 4)
        return Outcome(score, details)

    def _failure(self, spec: ComponentSpec, exc: BaseException, elapsed: float, expired: bool = False) -> Outcome:
        message = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        if expired:
            message = f"timed out after {spec.timeout_s:g}s (timeout_s)"
        details: dict[str, Any] = dict(getattr(exc, "details", None) or {})
        details.update(error=message, policy=spec.on_failure, elapsed_s=round(elapsed, 4))
        logger.warning("reward component %s failed (%s): %s", spec.name, spec.on_failure, message)
        return Outcome(0.0 if spec.on_failure == "zero" else None, details, ok=False)

    # ---- combining ---------------------------------------------------------------------------------------

    def _combine(self, trajectory: Trajectory, record: dict[str, Outcome]) -> float:
        total = used_weight = 0.0
        for spec in self.components:
            outcome = record[spec.name]
            trajectory.reward_details[spec.name] = _jsonable(outcome.details)
            trajectory.reward_components.pop(spec.name, None)
            if outcome.score is None:
                continue
            trajectory.reward_components[spec.name] = outcome.score
            total += spec.weight * outcome.score
            used_weight += spec.weight
        if used_weight and used_weight != self.total_weight:  # skipped components: renormalize the rest
            total *= self.total_weight / used_weight
        trajectory.reward = total
        logger.debug("reward %s = %.4f %s", trajectory.id, total, trajectory.reward_components)
        return total

    @staticmethod
    def _keep_loop_reward(trajectory: Trajectory) -> float:
        trajectory.reward = trajectory.reward or 0.0
        return trajectory.reward


def reward_problems(config: RewardConfig) -> list[str]:
    """Every problem of a `reward:` section (unknown types, options a component does not take, bad gates),
    found without building any component (a reward model would load its weights)."""
    problems: list[str] = []
    specs: list[ComponentSpec] = []
    for i, entry in enumerate(_entries(config)):
        try:
            specs.append(parse_spec(entry, i, config.on_failure, build=False))
        except UserError as exc:
            problems.append(str(exc))
    if not problems:
        try:
            _stages(specs)
        except UserError as exc:
            problems.append(str(exc))
    return problems


def _entries(config: RewardConfig) -> list[dict[str, Any]]:
    entries = list(config.components)
    if config.function:
        entries.insert(0, {"name": "compute_score", "type": config.function, "weight": 1.0})
    return entries


def _stages(specs: list[ComponentSpec]) -> list[list[ComponentSpec]]:
    """Components grouped so that each runs after the component gating it."""
    by_name: dict[str, ComponentSpec] = {}
    for spec in specs:
        if spec.name in by_name:
            raise UserError(f"reward component name {spec.name!r} is used twice; give each a distinct `name`")
        by_name[spec.name] = spec
    depth: dict[str, int] = {}

    def level(spec: ComponentSpec, seen: tuple[str, ...]) -> int:
        if spec.name in depth:
            return depth[spec.name]
        if spec.gate is None:
            depth[spec.name] = 0
            return 0
        if spec.gate.component not in by_name:
            raise UserError(
                f"reward component {spec.name!r} is gated on {spec.gate.component!r}, which is not a component; "
                f"known: {', '.join(by_name)}"
            )
        if spec.gate.component in seen:
            raise UserError(f"reward gates form a cycle: {' -> '.join((*seen, spec.gate.component))}")
        depth[spec.name] = level(by_name[spec.gate.component], (*seen, spec.name)) + 1
        return depth[spec.name]

    stages: list[list[ComponentSpec]] = []
    for spec in specs:
        d = level(spec, (spec.name,))
        stages.extend([] for _ in range(d + 1 - len(stages)))
        stages[d].append(spec)
    return stages


def _jsonable(value: Any) -> Any:
    """Details made JSON-safe (trajectories are saved as JSON): unknown objects become their `str`."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    return str(value)
