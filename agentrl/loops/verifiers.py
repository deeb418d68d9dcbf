"""verifiers environments as an agent loop: the environment's own rollout, parser and rubric, unchanged.

`agent.name=verifiers` with `agent.kwargs: {env_id: my-env, env_args: {...}}` (see `agentrl.envs.verifiers` for how
the environment loads and how its dataset becomes the run's samples). Each trajectory is the environment's own
`rollout()` (single-turn, multi-turn and tool environments alike: its `env_response`, its tools, its stop
conditions), with a client whose turns are generated token-in/token-out on the run's servers
(`agentrl.loops.verifiers_client`), then scored by the environment's rubric as verifiers scores a rollout: the
reward is the rubric's weighted sum; each reward function's score is a reward component (viewer, report), and
each zero-weight metric a trajectory metric `verifiers/<name>`.

A rollout that verifiers marks as errored (the model call or the environment failed) is a failed trajectory, not
trained on. An agentrl budget (`agent.max_turns`, the token budgets) ends the rollout as verifiers ends an overlong
prompt; it is scored, and keeps the budget's stop reason. The sampling settings are the run's (`rollout.*`), not
the environment's `sampling_args`.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field

from agentrl.config.schema import AgentRLConfig
from agentrl.envs.verifiers import environment_problems, import_verifiers, load_environment, split_samples
from agentrl.errors import UserError
from agentrl.loops.base import AgentLoopBase, LoopOptions
from agentrl.loops.conformance.case import LoopCheckCase
from agentrl.loops.context import AgentContext
from agentrl.loops.verifiers_client import TurnClient
from agentrl.tools.parsers import get_parser
from agentrl.types import Message, Sample, StopReason, Trajectory


class VerifiersOptions(LoopOptions):
    env_id: str = Field(
        description="the environment: an installed module's name (as verifiers' load_environment reads it, "
        "e.g. my-env for module my_env) or a path/to/env.py, either with a load_environment()"
    )
    env_args: dict[str, Any] = Field(default_factory=dict, description="keyword arguments of load_environment")


class VerifiersLoop(AgentLoopBase):
    """Runs one rollout of a verifiers environment per trajectory (see the module docstring)."""

    Options = VerifiersOptions
    roles = ("agent",)
    own_reward = "the verifiers environment's rubric"

    @classmethod
    def samples(cls, cfg: AgentRLConfig, split: str) -> list[Sample] | None:
        """The environment's dataset (`train`) or eval dataset (`eval`), for a split without data files."""
        return split_samples(cfg, split) if cfg.agent.kwargs.get("env_id") else None

    @classmethod
    def problems(cls, cfg: AgentRLConfig) -> list[str]:
        """The environment loads with its `env_args` and is a verifiers Environment."""
        env_id = cfg.agent.kwargs.get("env_id")
        if not isinstance(env_id, str):
            return []  # reported against `Options`
        return environment_problems(env_id, dict(cfg.agent.kwargs.get("env_args") or {}))

    @classmethod
    def environment_form(cls, cfg: AgentRLConfig) -> str:
        return f"verifiers environment {cfg.agent.kwargs.get('env_id')!r} (agent.kwargs.env_id)"

    @classmethod
    def check_case(cls) -> LoopCheckCase:
        """A one-question environment of verifiers' own API (`agentrl.loops.verifiers_check_env`), by path."""
        from agentrl.loops import verifiers_check_env as env

        word = env.WORD
        sample = Sample(prompt=[Message(role="user", content=f"Say the word {word}.")], ground_truth=word)
        config = {"agent": {"kwargs": {"env_id": env.__file__}}}
        return LoopCheckCase(config=config, sample=sample, reply=word)

    async def run(self, sample: Sample, ctx: AgentContext) -> Trajectory:
        options: VerifiersOptions = self.options
        env = load_environment(options.env_id, options.env_args)
        client = TurnClient(ctx, get_parser(self.config.tool_parser), self.policy_for("agent"))
        state = await env.rollout(rollout_input(sample), client, _model_name(ctx), {})
        raise_if_errored(state, client)
        if env.score_rollouts:
            await env.rubric.score_rollout(state)
        else:
            await env.rubric.dummy_score_rollout(state)
        await env.rubric.cleanup(state)
        record_score(ctx.trajectory, state, env.rubric)
        if client.stopped is not None:
            raise client.stopped  # scored above; the trajectory keeps the budget's stop reason
        ctx.trajectory.stop_reason = StopReason.MAX_TOKENS if ctx.last_turn_cut else StopReason.DONE
        return ctx.trajectory


def rollout_input(sample: Sample) -> dict[str, Any]:
    """The row verifiers made for this sample (`extra_info.verifiers_input`), or one built from a sample of a file."""
    row = sample.extra_info.get("verifiers_input")
    if isinstance(row, dict):
        return json.loads(json.dumps(row))  # a copy: the environment may change its input
    prompt = [m.to_openai() for m in sample.prompt]
    answer = "" if sample.ground_truth is None else str(sample.ground_truth)
    # no "task": verifiers reads a task as a JSON object and refuses a plain string (its datasets' rows have none)
    return {"prompt": prompt, "answer": answer, "info": dict(sample.extra_info), "example_id": 0}


def raise_if_errored(state: Any, client: TurnClient) -> None:
    """A rollout verifiers recorded as errored fails the trajectory, with the cause (ours when the model call
    failed: a server error, a cancelled request)."""
    error = state.get("error")
    if error is None or client.stopped is not None:
        return
    cause = error.__cause__
    if cause is not None and not isinstance(cause, import_verifiers().Error):
        raise cause
    raise RuntimeError(f"the verifiers environment's rollout failed: {type(error).__name__}: {error}")


def record_score(traj: Trajectory, state: Any, rubric: Any) -> None:
    """The rubric's reward on the trajectory: weighted functions as reward components, the rest as metrics."""
    weights = _weights(rubric)
    traj.reward = float(state["reward"] or 0.0)
    for name, score in (state.get("metrics") or {}).items():
        if weights.get(name, 0.0) != 0.0:
            traj.reward_components[name] = float(score)
        else:
            traj.metrics[f"verifiers/{name}"] = float(score)


def _weights(rubric: Any) -> dict[str, float]:
    """Each reward function's weight, by name, through RubricGroups."""
    if hasattr(rubric, "rubrics"):  # a RubricGroup sums its rubrics' scores, name by name
        merged: dict[str, float] = {}
        for part in rubric.rubrics:
            for name, weight in _weights(part).items():
                merged[name] = merged.get(name, 0.0) or weight
        return merged
    if getattr(rubric, "_get_group_reward_funcs", lambda: [])():
        raise UserError(
            "this verifiers environment's rubric has group reward functions (scored over a group of rollouts); "
            "agentrl scores each rollout on its own: use individual reward functions"
        )
    return {f.__name__: float(w) for f, w in zip(rubric.funcs, rubric.weights, strict=True)}


def _model_name(ctx: AgentContext) -> str:
    return str(getattr(ctx.tokenizer, "name_or_path", "") or "agentrl-policy")


__all__ = ["VerifiersLoop", "VerifiersOptions", "raise_if_errored", "record_score", "rollout_input"]
