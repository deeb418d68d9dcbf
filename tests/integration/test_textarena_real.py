"""TextArena games, for real: the package's own games and rewards, played by the default model on `hf` servers,
one training step each: a one-player puzzle, and a two-player game against a frozen opponent policy."""

import gzip
import json

import pytest

from agentrl.cli import main
from agentrl.types import StopReason, Trajectory

pytestmark = pytest.mark.integration
pytest.importorskip("textarena")


def run(out, *overrides):
    args = ["train", "recipe=textarena", "data.batch_size=1", "rollout.n=2", "trainer.steps=1", "trainer.eval_every=0"]
    assert main([*args, f"output_dir={out}", *overrides]) == 0
    (metrics,) = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    with gzip.open(out / "trajectories" / "step_0001.jsonl.gz", "rt") as f:
        return metrics, [Trajectory.from_json(line) for line in f]


def test_a_one_player_game_rolls_out_and_trains_a_step(hf_server_url, tmp_path):
    metrics, played = run(tmp_path, f"rollout.urls=[{hf_server_url}]", "agent.max_turns=3")
    assert metrics["rollout/trajectories"] == 2.0 and "train/loss" in metrics
    for traj in played:
        game = traj.metadata["textarena"]  # the game's own rewards, as env.close() gave them; none if unfinished
        assert traj.reward == game["rewards"].get("0", 0.0) and traj.num_turns >= 1
        assert game["finished"] or traj.stop_reason == StopReason.MAX_TURNS
        assert "Guess The Number" in traj.messages[0].content  # the game's own first observation


def test_a_two_player_game_against_a_frozen_opponent(hf_server_url, tmp_path):
    """TruthAndDeception: free-text turns, so that both players move whatever the untrained model writes."""
    metrics, played = run(
        tmp_path,
        "agent.kwargs={env_id: TruthAndDeception-v0, num_players: 2}",
        "agent.max_turns=3",
        "policies={player: {}, opponent: {trainable: false}}",
        f"policies.opponent.rollout.urls=[{hf_server_url}]",
        "agent.roles={player: player, opponent: opponent}",
    )
    assert "train/player/loss" in metrics and not any(k.startswith("train/opponent") for k in metrics)
    for traj in played:
        (opponent,) = traj.earlier_steps  # the opponent's own conversation
        replies = [s for s in opponent.segments if s.logprobs is not None]
        assert replies and all(s.policy == "opponent" and not s.trainable for s in replies)
        assert all(s.policy == "player" for s in traj.segments if s.trainable)
        assert traj.num_turns >= 1 and opponent.num_turns >= 1
        if traj.metadata["textarena"]["finished"]:  # the game ended within the turn budget: its own rewards
            rewards = traj.metadata["textarena"]["rewards"]
            assert traj.reward == rewards["0"] and traj.policy_rewards["opponent"] == rewards["1"]
