"""OpenEnv environments as a loop, with a scripted policy: agentrl serves the environment folder's app
(tests/openenv_echo, written with openenv-core's create_app) and plays it over openenv's own client."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

import agentrl.envs.openenv
from agentrl.config.loader import load_config
from agentrl.config.schema import AgentConfig
from agentrl.loops.manager import RolloutManager
from agentrl.loops.testing import ScriptedPolicy
from agentrl.trainer.preflight import run_problems
from agentrl.types import Message, Sample, StopReason

pytest.importorskip("openenv.core")

ENV_DIR = str(Path(__file__).parents[2] / "recipes" / "openenv" / "echo_word")


def play(tokenizer, replies, seed: int, **agent_options):
    agent = AgentConfig(name="openenv", kwargs={"env_dir": ENV_DIR}, **agent_options)
    manager = RolloutManager(ScriptedPolicy(tokenizer, replies), tokenizer, agent=agent)
    sample = Sample(prompt=[Message(role="user", content="Play.")], extra_info={"seed": seed})
    (traj,) = asyncio.run(manager.run([sample], n=1))
    return traj


def word_of(seed: int) -> str:
    import random

    return random.Random(seed).choice(["apple", "river", "stone", "cloud", "green", "light", "music", "paper"])


def test_the_environment_s_own_reward_ends_the_episode(tokenizer):
    word = word_of(1)
    traj = play(tokenizer, ["hello", f"I say {word}"], seed=1)
    assert traj.stop_reason == StopReason.DONE and traj.num_turns == 2 and not traj.failed
    assert traj.reward == 1.0 and traj.metadata["openenv"]["rewards"] == [0.0, 1.0]
    assert traj.messages[0].content == f"Play.\n\nprompt: Say the word {word}."  # the reset observation
    assert traj.messages[2].content == "echoed_message: hello"  # the step's observation, as the user's turn


def test_the_environment_ends_the_episode_at_its_own_limit(tokenizer):
    traj = play(tokenizer, ["no", "no", "no", "no"], seed=2, max_turns=8)
    assert traj.num_turns == 3 and traj.reward == 0.0 and traj.stop_reason == StopReason.DONE


def test_an_environment_that_raises_in_reset_fails_the_trajectory(tokenizer):
    traj = play(tokenizer, ["x"], seed=-1)
    assert traj.failed and traj.num_turns == 0 and "seed must be >= 0, not -1" in traj.error


def test_bad_settings_are_refused_at_start(tmp_path):
    base = ["agent.name=openenv", "data.train_files=[]"]
    (no_yaml,) = run_problems(load_config("quickstart", [*base, f"agent.kwargs.env_dir={tmp_path}"]))
    assert "has no openenv.yaml" in no_yaml
    (both,) = run_problems(
        load_config("quickstart", [*base, f"agent.kwargs.env_dir={ENV_DIR}", "agent.kwargs.base_url=http://h:1"])
    )
    assert "name the OpenEnv environment by one of env_dir" in both


class QuickDeadlineServer(agentrl.envs.openenv.OpenEnvServer):
    """The OpenEnv server agentrl starts, given 2 s (not 60) to become healthy."""

    def __init__(self, app, cwd=None, start_timeout_s=2.0):
        super().__init__(app, cwd, start_timeout_s)


def test_other_episodes_go_on_while_the_server_starts(tokenizer, tmp_path, monkeypatch):
    (tmp_path / "never_healthy.py").write_text("import time\n\ntime.sleep(60)  # never serves\n")
    monkeypatch.setattr(agentrl.envs.openenv, "OpenEnvServer", QuickDeadlineServer)
    agent = AgentConfig(name="openenv", kwargs={"env_dir": str(tmp_path), "app": "never_healthy:app"})
    manager = RolloutManager(ScriptedPolicy(tokenizer, ["x"]), tokenizer, agent=agent)
    sample = Sample(prompt=[Message(role="user", content="Play.")], extra_info={"seed": 0})
    ticks: list[float] = []

    async def another_episode() -> None:  # stands for every other coroutine of the event loop
        while True:
            ticks.append(time.monotonic())
            await asyncio.sleep(0.05)

    async def both():
        other = asyncio.create_task(another_episode())
        try:
            return await manager.run([sample], n=1)
        finally:
            other.cancel()

    (traj,) = asyncio.run(both())
    assert traj.failed and "was not healthy after 2s" in traj.error
    assert len(ticks) >= 10, f"the other coroutine ran {len(ticks)} times in the 2 s the start waited"
