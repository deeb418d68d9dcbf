"""GymAgentLoop: play one episode of a gymnasium env per trajectory, the model choosing each action in text."""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentrl.config.schema import AgentConfig, EnvConfig
from agentrl.errors import UserError
from agentrl.loops.base import LoopOptions
from agentrl.loops.conformance.case import LoopCheckCase
from agentrl.loops.context import AgentContext, StopLoop, with_system_prompt
from agentrl.loops.stepped import SteppedLoop
from agentrl.types import Message, Sample, StopReason, Trajectory

if TYPE_CHECKING:
    from agentrl.envs.gym import GymEpisode


class GymAgentLoop(SteppedLoop):
    """Plays a gymnasium env (`env:` config) through its text adapter, one episode per trajectory.

    The env is reset with the row's `extra_info["seed"]` (rows generated from `env.num_train_seeds` /
    `env.num_eval_seeds` carry one; `extra_info["env_kwargs"]` is merged over `env.kwargs`). The first user
    message is the adapter's instructions and the first observation, after the row's own prompt messages if any;
    with `env.instructions_role=system` the instructions are the system message instead, and `env.examples`
    (few-shot turns) come just before the first observation.
    Each turn the reply is parsed into an action and the env stepped; the next observation (or, for a reply that
    is not a valid action, feedback naming the valid form) comes back as a user message of non-trainable tokens.
    A reply cut at `rollout.max_tokens` is parsed like any other rather than ending the episode.

    Stop reasons: `done` when the episode terminates; `max_turns` when it is truncated (`env.max_steps`) or at
    `agent.max_turns`; `tool_error_limit` after `env.max_invalid_actions` invalid replies in a row;
    `context_overflow` at the token budget. The reward is the discounted return (`env.discount`) minus
    `env.invalid_action_penalty` per invalid reply, set however the trajectory ends; `metrics` get `env/return`,
    `env/success`, `env/steps`, `env/invalid_actions`, and `metadata["env"]` the seed, flags and final message.

    With `env.history_turns` set, each turn's prompt carries only the last that many observation/reply pairs
    before the current state (`GymEpisode.state_message`), and each turn is a step sample of its own
    (`Trajectory.earlier_steps`, trained on as separate rows); with 0 the policy sees only the current state.

    Per-turn credit: `turn_rewards` gets each turn's step reward (minus the invalid-action penalty for an invalid
    reply) and `turn_states` the state it started from; a last turn generated but never played (cut by the
    token budget) gets reward 0.

    Args:
        config: the `agent:` config.
        env: the env config; default: the run's `env:` section (`loop.run_config.env`).
    """

    Options = LoopOptions  # its options are the run's `env:` section
    records_turns = True
    roles = ("agent",)  # agent.roles={agent: NAME}: the policy that plays it, in a run with several

    @classmethod
    def check_case(cls) -> LoopCheckCase:
        """FrozenLake 4x4, not slippery, from the start cell: RIGHT, RIGHT, DOWN... until a limit ends it."""
        env = {"id": "FrozenLake-v1", "kwargs": {"is_slippery": False}, "max_steps": 4}
        sample = Sample(prompt=[], extra_info={"seed": 0})
        return LoopCheckCase(config={"env": env}, sample=sample, reply=_check_move, min_turns=2)

    def __init__(self, config: AgentConfig | None = None, env: EnvConfig | None = None, **kwargs: Any):
        super().__init__(config, **kwargs)
        self.env_config = env

    def _env(self) -> EnvConfig:
        cfg = self.env_config or (self.run_config.env if self.run_config is not None else None)
        if cfg is None or not cfg.enabled:
            raise UserError(
                "the gym loop needs an environment: set env.id (e.g. env.id=FrozenLake-v1) or "
                "env.entry_point=pkg.module:MyEnv, or pass GymAgentLoop(env=EnvConfig(...))"
            )
        return cfg

    async def begin(self, sample: Sample, ctx: AgentContext) -> _GymState:
        from agentrl.envs.gym import GymEpisode

        seed = _seed(sample)
        episode = await asyncio.to_thread(GymEpisode.from_config, self._env(), sample.extra_info.get("env_kwargs"))
        ctx.env = episode
        state = _GymState(episode, seed)
        try:
            first = await asyncio.to_thread(episode.reset, seed)
            opening = _opening(sample, episode, first)
            state.window = _Window(opening[:-1], episode, self._env().history_turns)
            ctx.start(opening)
        except BaseException:
            await self.end(ctx, state)
            raise
        return state

    async def step(self, ctx: AgentContext, state: _GymState) -> bool:
        episode, window = state.episode, state.window
        assert window is not None
        # a reply cut at rollout.max_tokens is still played (feedback when invalid), not the episode's end
        turn = await ctx.generate(continue_if_cut=True, policy=self.policy_for("agent"))
        outcome = await asyncio.to_thread(episode.act, turn.text)
        if outcome.terminated:
            ctx.trajectory.stop_reason = StopReason.DONE
            return True
        if outcome.truncated:
            raise StopLoop(StopReason.MAX_TURNS, f"episode truncated after {episode.steps} steps")
        if episode.invalid_limit_reached:
            raise StopLoop(StopReason.TOOL_ERROR_LIMIT, f"{episode.invalid_in_a_row} invalid actions in a row")
        if window.turns is None:
            ctx.add_messages([Message(role="user", content=outcome.text)])
        elif ctx.trajectory.num_turns >= ctx.budgets.max_turns:  # no prompt-only last step sample
            raise StopLoop(StopReason.MAX_TURNS)
        else:
            feedback = None if outcome.valid else outcome.text
            ctx.new_step_sample(window.next_prompt(ctx.trajectory.messages[-1], feedback))
        return False

    async def end(self, ctx: AgentContext, state: _GymState) -> None:
        _record(ctx.trajectory, state.episode, state.seed)
        state.episode.close()

    async def fork_state(self, state: _GymState, children: list[AgentContext]) -> list[_GymState]:
        """Each child gets a copy of the episode (`GymEpisode.fork`: the env and its random generator) and of the
        history window."""
        episodes = await asyncio.to_thread(state.episode.fork, len(children))
        states = []
        for ctx, episode in zip(children, episodes, strict=True):
            ctx.env = episode
            window = state.window.copy_for(episode) if state.window is not None else None
            states.append(_GymState(episode, state.seed, window))
        return states

    async def discard(self, state: _GymState) -> None:
        state.episode.close()


@dataclass
class _GymState:
    """What the gym loop keeps between turns."""

    episode: GymEpisode
    seed: int | None
    window: _Window | None = None


def _opening(sample: Sample, episode: GymEpisode, first: str) -> list[Message]:
    """The row's own messages, the env's system text (merged into a system message), its few-shot turns, and
    the first observation."""
    messages = list(sample.prompt)
    if episode.system_text:
        messages = with_system_prompt(messages, episode.system_text)
    return [*messages, *episode.example_messages(), Message(role="user", content=first)]


class _Window:
    """The prompts of an episode played with `env.history_turns`: each turn a new step sample of the opening
    (row messages, system text, few-shot turns), the last `turns` observation/reply pairs and the current state;
    the instructions (when not the system text) open the first user message of the window."""

    def __init__(self, opening: list[Message], episode: GymEpisode, turns: int | None):
        self.opening, self.episode, self.turns = opening, episode, turns
        self.shown = Message(role="user", content=episode.state_message())  # this turn's observation, bare
        self.played: list[tuple[Message, Message]] = []

    def copy_for(self, episode: GymEpisode) -> _Window:
        """This window, for a fork of its episode."""
        window = copy.copy(self)
        window.episode, window.played = episode, list(self.played)
        return window

    def next_prompt(self, reply: Message, feedback: str | None) -> list[Message]:
        """The messages of the next turn's prompt, after `reply` to the current one."""
        self.played.append((self.shown, reply))
        self.shown = Message(role="user", content=self.episode.state_message(feedback))
        kept = self.played[len(self.played) - self.turns :] if self.turns else []
        messages = [*(m for pair in kept for m in pair), self.shown]
        instructions = self.episode.user_instructions
        if instructions:
            messages[0] = Message(role="user", content=f"{instructions}\n\n{messages[0].content}")
        return [*self.opening, *messages]


def _check_move(conversation: str) -> str:
    """`check_case`'s player: a pure function of the conversation (two moves right, then down)."""
    return "DOWN" if conversation.count("RIGHT") >= 2 else "RIGHT"


def _seed(sample: Sample) -> int | None:
    seed = sample.extra_info.get("seed")
    if seed is None or (isinstance(seed, int) and not isinstance(seed, bool)):
        return seed
    raise UserError(f"row {sample.id or '?'}: extra_info.seed must be a whole number, not {seed!r}")


def _record(traj: Trajectory, episode: GymEpisode, seed: int | None) -> None:
    """The episode's reward, metrics and outcome on the trajectory (also when a budget ended it)."""
    traj.reward = episode.reward
    traj.reward_components["env"] = episode.discounted_return
    if episode.invalid_action_penalty:
        traj.reward_components["invalid_actions"] = -episode.invalid_action_penalty * episode.invalid_actions
    traj.metrics.update(episode.metrics())
    unplayed = traj.num_turns_in_all_steps() - len(episode.turn_rewards)
    traj.turn_rewards = episode.turn_rewards + [0.0] * unplayed
    traj.turn_states = episode.turn_states + [episode.state_key] * unplayed
    traj.metadata["env"] = {
        "seed": seed,
        "terminated": episode.terminated,
        "truncated": episode.truncated,
        "success": episode.success,
        "final_message": episode.last_text,
    }
