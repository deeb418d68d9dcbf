"""verifiers 0.4 without its interpreter: the env config agentrl asks for, the verdict read onto the trajectory,
the episode server's task lookup and verdict, a server that dies mid-episode, and the start-up refusal that names
the install command. Played for real in tests/integration/test_verifiers_v1_real.py."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import agentrl.verifiers_v1.client as client_module
import agentrl.verifiers_v1.install as install_module
from agentrl.config import load_config
from agentrl.gateway.verifiers_v1 import VerifiersV1Loop, VerifiersV1Options, env_request, record_verdict
from agentrl.types import StopReason, Trajectory
from agentrl.verifiers_v1.client import EpisodeServer, EpisodeServerError
from agentrl.verifiers_v1.episode_server import find_task, verdict

TASKSET = Path(__file__).parents[2] / "recipes" / "verifiers_v1" / "taskset.py"


def test_the_env_config_is_agentrl_s_defaults_under_the_user_s_own():
    options = VerifiersV1Options(
        taskset=str(TASKSET),
        taskset_args={"num_tasks": 8},
        eval_taskset_args={"split": "eval"},
        env={"agent": {"harness": {"id": "bash"}, "timeout": {"rollout": 60}}},
    )
    train, held_out = env_request(options, "train", 4), env_request(options, "eval", None)
    assert train == {
        "env": {
            "taskset": {"num_tasks": 8, "id": "taskset"},
            "agent": {"harness": {"id": "bash"}, "runtime": {"type": "subprocess"}, "max_turns": 4,
                      "timeout": {"rollout": 60}},
        },
        "path": str(TASKSET.parent),
    }  # fmt: skip
    assert held_out["env"]["taskset"] == {"num_tasks": 8, "split": "eval", "id": "taskset"}
    assert "max_turns" not in held_out["env"]["agent"]
    assert env_request(VerifiersV1Options(taskset="reverse-text"), "train", None)["path"] is None


def test_the_verdict_is_the_reward_its_weighted_scores_and_metrics():
    traj = Trajectory(stop_reason=StopReason.DONE)
    record_verdict(
        traj,
        {
            "ok": True, "reward": 1.2, "errors": [], "stop_condition": "one_reply",
            "rewards": {"correct_sum": {"score": 1.0, "weight": 1.0}, "answer_format": {"score": 1.0, "weight": 0.2},
                        "logged": {"score": 0.5, "weight": 0.0}},
            "metrics": {"reply_chars": 17.0},
        },
    )  # fmt: skip
    assert traj.reward == 1.2 and traj.reward_components == {"correct_sum": 1.0, "answer_format": 1.0}
    assert traj.metrics == {"verifiers/logged": 0.5, "verifiers/reply_chars": 17.0}
    assert traj.stop_reason == StopReason.DONE and traj.metadata["verifiers_stop_condition"] == "one_reply"


def test_a_failed_episode_fails_the_trajectory_unless_a_budget_ended_it():
    failed = {"ok": False, "reward": 0.0, "rewards": {}, "metrics": {}, "stop_condition": None,
              "errors": ["HarnessError: the program exited 1"]}  # fmt: skip
    done, cut = Trajectory(stop_reason=StopReason.DONE), Trajectory(stop_reason=StopReason.MAX_TURNS)
    record_verdict(done, failed)
    record_verdict(cut, failed)
    assert done.failed and "HarnessError: the program exited 1" in (done.error or "")
    assert cut.stop_reason == StopReason.MAX_TURNS and not cut.failed


def test_the_episode_server_finds_a_task_by_key_or_index_and_reads_a_multi_agent_verdict():
    tasks = [SimpleNamespace(key="a"), SimpleNamespace(key="b")]
    assert find_task(tasks, {"key": "b"}) is tasks[1] and find_task(tasks, {"index": 0}) is tasks[0]
    with pytest.raises(LookupError, match="no task with key c"):
        find_task(tasks, {"key": "c"})
    with pytest.raises(LookupError, match="2 tasks, none at index 5"):
        find_task(tasks, {"index": 5})

    def trace(name: str, score: float) -> SimpleNamespace:
        rewards = {"win": SimpleNamespace(score=score, weight=1.0), "skipped": None}
        return SimpleNamespace(
            agent=SimpleNamespace(name=name), rewards=rewards, metrics={"moves": 3.0}, reward=score,
            errors=[], stop_condition="done" if name == "second" else None, is_timeout=False,
        )  # fmt: skip

    episode = SimpleNamespace(traces=[trace("first", 1.0), trace("second", 0.0)], errors=[], ok=True, is_timeout=False)
    answer = verdict(episode)
    first, second = {"score": 1.0, "weight": 1.0}, {"score": 0.0, "weight": 1.0}
    assert answer["rewards"] == {"first/win": first, "second/win": second}
    assert answer["metrics"] == {"first/moves": 3.0, "second/moves": 3.0}
    assert (answer["reward"], answer["stop_condition"], answer["ok"]) == (1.0, "done", True)


async def test_a_server_that_dies_mid_episode_fails_it_with_its_last_words(tmp_path, monkeypatch):
    dying = tmp_path / "dying_server.py"
    dying.write_text("import sys\nsys.stdin.readline()\nprint('out of memory', file=sys.stderr)\nsys.exit(3)\n")
    monkeypatch.setattr(client_module, "SERVER", dying)
    server = EpisodeServer(sys.executable)
    with pytest.raises(EpisodeServerError, match=r"exited with 3 \(out of memory\)"):
        await server.episode({"env": {}, "task": {"index": 0}, "base_url": "http://x", "model": "policy"})
    assert not server.alive


def test_without_verifiers_0_4_the_run_is_refused_naming_the_command_that_installs_it(tmp_path, monkeypatch):
    monkeypatch.delenv("AGENTRL_VERIFIERS_PYTHON", raising=False)
    monkeypatch.setattr(install_module, "CHECKOUT_VENV", tmp_path / ".venv-verifiers")
    (problem,) = VerifiersV1Loop.problems(load_config(overrides=["recipe=verifiers_v1"]))
    assert "verifiers==0.4.0" in problem and "python -m agentrl.verifiers_v1.install" in problem
