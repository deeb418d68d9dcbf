"""TextArena games, read unchanged from the `textarena` package: one-player puzzles and two-player games.

`agent.name=textarena` with `agent.kwargs: {env_id: GuessTheNumber-v0}` plays the game `textarena.make(env_id)`
builds, reset with the sample's `extra_info.seed`. Each player sees the game's own observations as user messages in
a conversation of its own and answers in the game's own format; the game's own rewards (`env.close()`) are the
reward: player 0's is the trajectory's.

Two-player games (`num_players: 2`) have two roles: `player` (player 0) and `opponent` (player 1). `agent.roles`
maps each to a policy (`policies:`): a frozen policy as a fixed opponent, or the same policy on both sides
(self-play, the default when `opponent` is not mapped). The opponent's conversation is kept as an earlier step
sample of the trajectory. Each side's tokens record their role (`Segment.player`) and train on that side's own
reward (`Trajectory.player_rewards`): in self-play the winner's moves and the loser's are compared, never both
rewarded with player 0's outcome.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field, field_validator

from agentrl.config.schema import AgentRLConfig
from agentrl.loops.base import LoopOptions
from agentrl.loops.conformance.case import LoopCheckCase
from agentrl.loops.context import AgentContext
from agentrl.loops.stepped import SteppedLoop
from agentrl.registry import import_package
from agentrl.types import Message, Sample, StopReason, Trajectory


def _textarena() -> Any:
    return import_package("textarena", "textarena", "agent.name=textarena")


def game_names() -> list[str]:
    """The games the installed textarena registers (without their -train / -raw variants)."""
    names = _textarena().envs.registration.ENV_REGISTRY
    return sorted(n for n in names if not n.endswith(("-train", "-raw")))


class TextArenaOptions(LoopOptions):
    env_id: str = Field(description="a TextArena game id, e.g. GuessTheNumber-v0 or TicTacToe-v0")
    num_players: int = Field(1, ge=1, le=2, description="1: a puzzle; 2: player against opponent")

    @field_validator("env_id")
    @classmethod
    def _known(cls, env_id: str) -> str:
        if env_id not in _textarena().envs.registration.ENV_REGISTRY:
            raise ValueError(f"textarena has no game {env_id!r}; its games: {', '.join(game_names())}")
        return env_id


class TextArenaLoop(SteppedLoop):
    """Plays one TextArena game per trajectory (see the module docstring).

    Its episodes fork: each child gets a deep copy of the game (`copy.deepcopy`: the board, the hidden answer, the
    game's own random generator when it keeps one) and of the opponent's conversation so far."""

    Options = TextArenaOptions
    roles = ("player", "opponent")
    own_reward = "the TextArena game's own rewards (each side's its own)"

    @classmethod
    def environment_form(cls, cfg: AgentRLConfig) -> str:
        return f"TextArena game {cfg.agent.kwargs.get('env_id')!r} (agent.kwargs.env_id)"

    @classmethod
    def plays_several_roles(cls, cfg: AgentRLConfig) -> bool:
        return int(cfg.agent.kwargs.get("num_players", 1)) >= 2

    @classmethod
    def check_case(cls) -> LoopCheckCase:
        """Tic-tac-toe in self-play: player 0 takes the top row before player 1 completes the middle one."""
        return LoopCheckCase(
            config={"agent": {"kwargs": {"env_id": "TicTacToe-v0", "num_players": 2}}},
            sample=Sample(prompt=[Message(role="user", content="Play.")], extra_info={"seed": 1}),
            reply=_scripted_move,
            min_turns=3,
        )

    async def begin(self, sample: Sample, ctx: AgentContext) -> GameState:
        options: TextArenaOptions = self.options
        env = _textarena().make(options.env_id)
        await asyncio.to_thread(env.reset, num_players=options.num_players, seed=sample.extra_info.get("seed"))
        return GameState(env, _conversation_of_its_own(ctx))

    async def step(self, ctx: AgentContext, state: GameState) -> bool:
        player, observation = state.env.get_observation()
        turn_ctx = ctx if player == 0 else state.opponent
        message = [Message(role="user", content=render(observation))]
        if player in state.started:
            turn_ctx.add_messages(message)
        else:
            turn_ctx.start(message)
            state.started.add(player)
        role = "player" if player == 0 else "opponent"
        turn = await turn_ctx.generate(policy=self.policy_for(role), player=role, continue_if_cut=True)
        state.done, _ = await asyncio.to_thread(state.env.step, turn.text)
        return state.done

    async def end(self, ctx: AgentContext, state: GameState) -> None:
        """Score the game (also when a budget ended it early: an unfinished game scores 0)."""
        rewards, game_info = await asyncio.to_thread(state.env.close)
        if 1 in state.started:
            ctx.trajectory.earlier_steps.insert(0, state.opponent.trajectory)
        self._score(ctx.trajectory, rewards or {}, game_info or {}, finished=state.done)

    async def fork_state(self, state: GameState, children: list[AgentContext]) -> list[GameState]:
        opponents = state.opponent.fork(len(children))
        return [GameState(copy.deepcopy(state.env), opponent, set(state.started), state.done) for opponent in opponents]

    async def discard(self, state: GameState) -> None:
        return None

    def _score(self, traj: Trajectory, rewards: dict[int, float], game_info: dict[int, Any], finished: bool) -> None:
        traj.stop_reason = StopReason.DONE
        traj.reward = float(rewards.get(0, 0.0))
        traj.metrics["textarena/success"] = float(traj.reward > 0)
        traj.metadata["textarena"] = {"rewards": rewards, "game_info": _plain(game_info), "finished": finished}
        traj.player_rewards = {role: float(rewards.get(index, 0.0)) for index, role in enumerate(self.roles)}
        if self.options.num_players == 1:
            del traj.player_rewards["opponent"]
        by_policy: dict[str, list[float]] = {}  # each mapped policy's outcome, for its reward curves
        for role, reward in traj.player_rewards.items():
            if (policy := self.policy_for(role)) is not None:
                by_policy.setdefault(policy, []).append(reward)
        traj.policy_rewards = {policy: sum(r) / len(r) for policy, r in by_policy.items()}


@dataclass
class GameState:
    """One game under way: the TextArena env, the opponent's conversation, the players who spoke, and whether the
    game is over."""

    env: Any
    opponent: AgentContext
    started: set[int] = field(default_factory=set)
    done: bool = False


def _conversation_of_its_own(ctx: AgentContext) -> AgentContext:
    """A context for the opponent: the same model, tokenizer, sampling and budgets, its own token sequence (a
    context builds the trajectory it is given)."""
    trajectory = Trajectory(group_id=ctx.trajectory.group_id, sample_index=ctx.trajectory.sample_index)
    return dataclasses.replace(ctx, trajectory=trajectory)


def _scripted_move(conversation: str) -> str:
    """`check_case`'s player: the first free cell of its own preference (player 0 the top row, player 1 the middle
    one), read from the last board the game showed."""
    preference = (3, 4, 5, 6, 7, 8, 0, 1, 2) if "You are Player 1" in conversation else tuple(range(9))
    board = conversation.rsplit("Available Moves:", 1)
    free = set(re.findall(r"\[(\d)\]", board[1].split("\n", 1)[0])) if len(board) == 2 else None
    return next(f"[{cell}]" for cell in preference if free is None or str(cell) in free)


def render(observation: list[tuple[int, str, Any]] | str) -> str:
    """The text of a TextArena observation (its messages, in order)."""
    if isinstance(observation, str):
        return observation
    return "\n".join(text for _, text, _ in observation)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value if isinstance(value, str | int | float | bool | type(None)) else str(value)


__all__ = ["TextArenaLoop", "TextArenaOptions", "game_names", "render"]
