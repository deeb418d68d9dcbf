"""verifiers 0.4 (`verifiers.v1`) environments as an agent loop: the taskset's tasks, its harness, its stop
conditions and its reward functions, unchanged, every model call recorded token-exactly by agentrl's gateway.

`agent.name=verifiers_v1` with `agent.kwargs: {taskset: my-taskset, taskset_args: {...}}`: `taskset` is an
installed taskset package's id, as verifiers' `--env.taskset.id` reads it, or a `path/to/taskset.py` (its folder
goes on verifiers' path and its stem is the id). With no `data.train_files` the training samples are the taskset's
tasks (`data.num_train_samples` of them) and the held-out ones the same taskset loaded with
`agent.kwargs.eval_taskset_args` over `taskset_args` (none without them: a taskset has no eval split of its own).

Each trajectory is verifiers' own `Env.run_episode(task, ModelContext)`, played in verifiers' interpreter
(`agentrl.verifiers_v1`) against the trajectory's gateway session, so the tokens trained are exactly the ones
generated, whatever the harness sends (chat completions, Responses or Messages). Defaults: verifiers' `null`
harness (chat, and the taskset's tools through MCP) in the `subprocess` runtime (the harness program runs on this
machine, without a container: a harness that executes code needs a container runtime, set through
`agent.kwargs.env`, which is merged over the whole verifiers env config). `agent.max_turns` is also the verifiers
agent's `max_turns`, so the harness stops where the gateway would refuse.

The reward is the trace's (each reward function's score times its weight, summed); each weighted function's score
is a reward component, each metric (and zero-weight reward) a trajectory metric `verifiers/<name>`. An episode
verifiers marks as failed is a failed trajectory with its errors, unless an agentrl budget ended it (it keeps the
budget's stop reason and whatever was scored).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from pydantic import Field

from agentrl.config.schema import AgentRLConfig
from agentrl.errors import UserError
from agentrl.gateway import GatewaySession
from agentrl.gateway.agent_loop import OpenAIAgentLoop
from agentrl.loops.base import LoopOptions
from agentrl.loops.conformance.case import LoopCheckCase
from agentrl.loops.context import AgentContext
from agentrl.types import Message, Sample, StopReason, Trajectory
from agentrl.verifiers_v1.client import ask, episode_server
from agentrl.verifiers_v1.install import VerifiersInstallError, require_verifiers_python

TASK_KEY = "verifiers_v1"
"""A sample's `extra_info` entry naming its task: `{"split", "key"}` (the task's content key) or `{"split",
"index"}`."""
CHECK_TASKSET = Path(__file__).parents[1] / "verifiers_v1" / "check_taskset.py"


class VerifiersV1Options(LoopOptions):
    taskset: str = Field(description="the taskset: an installed taskset package's id, or a path/to/taskset.py")
    taskset_args: dict[str, Any] = Field(default_factory=dict, description="the taskset's config fields")
    eval_taskset_args: dict[str, Any] | None = Field(
        None, description="config fields over taskset_args for the held-out tasks (none without them)"
    )
    env: dict[str, Any] = Field(
        default_factory=dict,
        description="verifiers env config merged over agentrl's defaults (agent.harness.id=null, "
        "agent.runtime.type=subprocess), e.g. {agent: {harness: {id: bash}, runtime: {type: docker}}}",
    )
    model_name: str = Field("policy", description="the model id the harness is told to use")
    timeout_s: float | None = Field(None, gt=0, description="wall-clock budget of one episode (time_budget)")
    honour_request_sampling: bool = Field(
        False, description="take the harness's own sampling settings (see openai_agent's option of the same name)"
    )


class VerifiersV1Loop(OpenAIAgentLoop):
    """Plays one verifiers 0.4 episode per trajectory through a gateway session (see the module docstring)."""

    Options = VerifiersV1Options  # type: ignore[assignment]
    own_reward = "the verifiers taskset's reward functions"
    no_compaction_reason = "a verifiers harness compacts its own history (each rewrite starts a new step sample)"

    @classmethod
    def samples(cls, cfg: AgentRLConfig, split: str) -> list[Sample] | None:
        """The taskset's tasks (`train`), or those of the taskset loaded with `eval_taskset_args` (`eval`)."""
        options = _options(cfg)
        if options is None:
            return None
        if split == "eval" and options.eval_taskset_args is None:
            return []
        limit = cfg.data.num_train_samples if split == "train" else cfg.data.num_eval_samples
        rows = ask("tasks", env_request(options, split, cfg.agent.max_turns))[:limit]
        return [_sample(options.taskset, split, row) for row in rows]

    @classmethod
    def problems(cls, cfg: AgentRLConfig) -> list[str]:
        """verifiers 0.4's interpreter is there, and the taskset and its env load."""
        options = _options(cfg)
        if options is None:
            return []  # reported against `Options`
        try:
            require_verifiers_python()
        except VerifiersInstallError as exc:
            return [str(exc)]
        found = []
        for split in ("train", "eval") if options.eval_taskset_args is not None else ("train",):
            for problem in ask("check", env_request(options, split, cfg.agent.max_turns)):
                found.append(f"agent.kwargs ({split} taskset {options.taskset!r}): verifiers cannot load it: {problem}")
        return found

    @classmethod
    def environment_form(cls, cfg: AgentRLConfig) -> str:
        return f"verifiers 0.4 taskset {cfg.agent.kwargs.get('taskset')!r} (agent.kwargs.taskset)"

    @classmethod
    def check_case(cls) -> LoopCheckCase:
        """The first task of a one-word taskset in verifiers 0.4's own API (`agentrl/verifiers_v1/check_taskset.py`)."""
        sample = Sample(
            prompt=[Message(role="user", content="Say the word amber.")],
            extra_info={TASK_KEY: {"split": "train", "index": 0}},
        )
        config = {"agent": {"kwargs": {"taskset": str(CHECK_TASKSET)}}}
        return LoopCheckCase(config=config, sample=sample, reply="amber", needs=frozenset({"server"}))

    def _harness_name(self) -> str | None:
        return None  # verifiers' harness runs in verifiers' runtime, not an agentrl harness in a task container

    @contextlib.asynccontextmanager
    async def _sandbox(self, sample: Sample, ctx: AgentContext) -> AsyncIterator[None]:
        yield  # the harness runs in verifiers' own runtime

    async def run(self, sample: Sample, ctx: AgentContext) -> Trajectory:
        traj = await super().run(sample, ctx)
        verdict = traj.metadata.pop("agent_result", None)
        if isinstance(verdict, dict):
            record_verdict(traj, verdict)
        return traj

    async def _run_agent(self, session: GatewaySession, sample: Sample, ctx: AgentContext) -> Any:
        options: VerifiersV1Options = self.options  # type: ignore[assignment]
        where = sample.extra_info.get(TASK_KEY)
        if not isinstance(where, dict) or not ({"key", "index"} & where.keys()):
            raise UserError(
                f"sample {sample.id!r} names no verifiers task (extra_info.{TASK_KEY}: {{split, key}}): run without "
                "data.train_files so the samples are the taskset's own tasks"
            )
        max_turns = self.run_config.agent.max_turns if self.run_config is not None else None
        request = env_request(options, str(where.get("split", "train")), max_turns)
        task = {"key": where["key"]} if "key" in where else {"index": where["index"]}
        return await episode_server().episode(
            {**request, "task": task, "base_url": session.base_url, "model": options.model_name}
        )


def env_request(options: VerifiersV1Options, split: str, max_turns: int | None) -> dict[str, Any]:
    """What the episode server loads: verifiers' env config for `split`, and the folder a taskset file is in."""
    taskset_id, path = _taskset_id(options.taskset)
    held_out = options.eval_taskset_args if split == "eval" else None
    args = {**options.taskset_args, **(held_out or {})}
    agent: dict[str, Any] = {"harness": {"id": "null"}, "runtime": {"type": "subprocess"}}
    if max_turns is not None:
        agent["max_turns"] = max_turns
    env = _merged({"taskset": {**args, "id": taskset_id}, "agent": agent}, options.env)
    return {"env": env, "path": path}


def record_verdict(traj: Trajectory, verdict: dict[str, Any]) -> None:
    """The episode's reward, reward components and metrics on the trajectory; its errors fail it, unless an
    agentrl budget already ended it."""
    traj.reward = float(verdict["reward"])
    for name, reward in verdict["rewards"].items():
        if reward["weight"] != 0.0:
            traj.reward_components[name] = reward["score"]
        else:
            traj.metrics[f"verifiers/{name}"] = reward["score"]
    traj.metrics.update({f"verifiers/{name}": value for name, value in verdict["metrics"].items()})
    if verdict["stop_condition"]:
        traj.metadata["verifiers_stop_condition"] = verdict["stop_condition"]
    if not verdict["ok"] and traj.stop_reason == StopReason.DONE:
        traj.stop_reason = StopReason.ERROR
        traj.error = "verifiers' episode failed: " + "; ".join(verdict["errors"] or ["no error recorded"])


def _options(cfg: AgentRLConfig) -> VerifiersV1Options | None:
    kwargs = cfg.agent.kwargs
    return VerifiersV1Options(**kwargs) if isinstance(kwargs.get("taskset"), str) else None


def _taskset_id(taskset: str) -> tuple[str, str | None]:
    """The id verifiers imports, and the folder to put on its path (a taskset given as a .py file)."""
    if not taskset.endswith(".py"):
        return taskset, None
    path = Path(taskset).resolve()
    if not path.is_file():
        raise UserError(f"agent.kwargs.taskset: no file {taskset}; name a taskset .py file or an installed taskset id")
    return path.stem, str(path.parent)


def _merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in over.items():
        out[key] = _merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def _sample(taskset: str, split: str, row: dict[str, Any]) -> Sample:
    prompt = row["prompt"]
    messages = [Message(role="system", content=row["system"])] if row.get("system") else []
    if isinstance(prompt, str):
        messages.append(Message(role="user", content=prompt))
    else:
        messages += [Message(role=m["role"], content=m.get("content")) for m in prompt or []]
    return Sample(
        prompt=messages,
        id=row.get("name") or row["key"][:16],
        data_source=f"verifiers/{Path(taskset).stem}",
        extra_info={TASK_KEY: {"split": split, "key": row["key"]}},
    )


__all__ = ["VerifiersV1Loop", "VerifiersV1Options", "env_request", "record_verdict"]
