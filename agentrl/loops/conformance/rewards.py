"""The reward check of `check_loop`: the reward that reaches each trainable token is its own role's.

The roles are read from the segments (`Segment.player`), so a loop that declares none is checked all the same;
the trainer's own split (`agentrl.loops.player_views.player_rows`) is what is checked.
"""

from __future__ import annotations

from agentrl.loops.conformance.play import Episode
from agentrl.loops.player_views import generated_players, player_rows


def reward_problems(episode: Episode) -> list[str]:
    """Several roles generated tokens: each has a reward of its own, and each trained row holds one role's tokens
    with that role's reward."""
    traj = episode.trajectory
    players = generated_players(traj)
    if len(players) < 2:
        return []
    unrewarded = [p for p in players if p is None or p not in traj.player_rewards]
    if unrewarded:
        return [
            f"reward: roles {_names(players)} generated tokens of one episode, but {_names(unrewarded)} have no "
            "reward of their own, so they would train on another role's: set Trajectory.player_rewards[role] for "
            "every role that generated"
        ]
    problems = []
    for row in player_rows([traj]):
        mine = {s.player for step in row.step_samples() for s in step.segments if s.trainable}
        player = row.metadata.get("player")
        if mine != {player} or row.reward != traj.player_rewards[player]:
            problems.append(f"reward: a trained row of role {player!r} holds {_names(list(mine))}'s tokens")
    return problems


def _names(players: list[str | None]) -> str:
    return ", ".join("(none)" if p is None else p for p in players)


__all__ = ["reward_problems"]
