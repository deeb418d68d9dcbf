"""OpenEnv environments as an agent loop: reset and step over openenv-core's own client, unchanged.

`agent.name=openenv` with `agent.kwargs: {env_dir: path/to/env}` (or `app`, or `base_url`: see
`agentrl.envs.openenv`, which starts the server). Each trajectory opens its own session (`GenericEnvClient`),
resets it with the sample's `extra_info.seed`, and alternates: the observation as a user message (the sample's
prompt, when it has one, comes first), the model's reply as the action's `action_field`, until the environment says
`done` or a budget ends the episode. The reward is the sum of the environment's step rewards (each step's own is
kept in `metadata.openenv.rewards`). An environment that raises in reset or step fails the trajectory (it is not
trained on).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field, model_validator

from agentrl.config.schema import AgentRLConfig
from agentrl.envs.openenv import import_openenv, openenv_problems, server_url
from agentrl.loops.base import AgentLoopBase, LoopOptions
from agentrl.loops.conformance.case import LoopCheckCase
from agentrl.loops.context import AgentContext
from agentrl.types import Message, Sample, Trajectory

HIDDEN_FIELDS = ("done", "reward", "metadata")
"""Observation fields the model is not shown (they are the environment's signals to the trainer)."""


class OpenEnvOptions(LoopOptions):
    env_dir: str | None = Field(None, description="an OpenEnv environment folder (its openenv.yaml names the app)")
    app: str | None = Field(None, description="an OpenEnv ASGI app, module:app, served by agentrl")
    base_url: str | None = Field(None, description="a running OpenEnv server, http://host:port")
    action_field: str = Field("message", description="the action field the model's reply fills")
    observation_fields: list[str] | None = Field(
        None, description="observation fields shown to the model (None: all but done, reward and metadata)"
    )
    reset_kwargs: dict[str, Any] = Field(default_factory=dict, description="extra keyword arguments of reset")

    @model_validator(mode="after")
    def _reachable(self) -> OpenEnvOptions:
        if problems := openenv_problems(self.env_dir, self.app, self.base_url):
            raise ValueError("; ".join(problems))
        return self


class OpenEnvLoop(AgentLoopBase):
    """Plays one OpenEnv episode per trajectory (see the module docstring)."""

    Options = OpenEnvOptions
    roles = ("agent",)

    @classmethod
    def check_case(cls) -> LoopCheckCase:
        """An OpenEnv server: a recipe's (`agentrl check loop=openenv recipe=openenv`) or the caller's
        (`check_loop(..., config={"agent": {"kwargs": {"env_dir": ...}}})`: env_dir, app or base_url)."""
        return LoopCheckCase(
            needs=frozenset({"server"}), lacks="an OpenEnv environment (agent.kwargs.env_dir, app or base_url)"
        )

    @classmethod
    def environment_form(cls, cfg: AgentRLConfig) -> str:
        kwargs = cfg.agent.kwargs
        where = kwargs.get("env_dir") or kwargs.get("app") or kwargs.get("base_url")
        return f"OpenEnv environment {where!r} (agent.kwargs)"

    async def run(self, sample: Sample, ctx: AgentContext) -> Trajectory:
        options: OpenEnvOptions = self.options
        url = await server_url(options.env_dir, options.app, options.base_url)
        client = import_openenv().GenericEnvClient(base_url=url)
        rewards: list[float] = []
        ctx.trajectory.metadata["openenv"] = {"rewards": rewards}
        try:
            seed = sample.extra_info.get("seed")
            result = await client.reset(seed=seed, episode_id=ctx.trajectory.id, **options.reset_kwargs)
            ctx.start(first_messages(sample, render(result.observation, options.observation_fields)))
            while True:
                turn = await ctx.generate(policy=self.policy_for("agent"), continue_if_cut=True)  # cut: still acts
                result = await client.step({options.action_field: turn.text.strip()})
                rewards.append(float(result.reward or 0.0))
                ctx.trajectory.reward = sum(rewards)  # kept when a budget ends the episode
                if result.done:
                    break
                observation = render(result.observation, options.observation_fields)
                ctx.add_messages([Message(role="user", content=observation)])
        finally:
            await client.close()
        ctx.finish()
        return ctx.trajectory


def first_messages(sample: Sample, observation: str) -> list[Message]:
    """The sample's prompt (instructions), then the first observation as the user's turn."""
    messages = list(sample.prompt)
    if messages and messages[-1].role == "user" and isinstance(messages[-1].content, str):
        last = messages[-1]
        return [*messages[:-1], last.model_copy(update={"content": f"{last.content}\n\n{observation}"})]
    return [*messages, Message(role="user", content=observation)]


def render(observation: dict[str, Any], fields: list[str] | None) -> str:
    """An observation as text: one field's value alone, or `name: value` lines."""
    shown = {k: v for k, v in observation.items() if (k in fields if fields else k not in HIDDEN_FIELDS)}
    if len(shown) == 1:
        return _text(next(iter(shown.values())))
    return "\n".join(f"{k}: {_text(v)}" for k, v in shown.items() if v not in ("", None))


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


__all__ = ["OpenEnvLoop", "OpenEnvOptions", "render"]
