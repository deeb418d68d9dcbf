"""The swe_explore episode statistics: resolved rate, turns, and whether a resolved episode explored before its edit."""

import gzip
import importlib.util
import json
import sys
from pathlib import Path

import pytest

from agentrl.types import Message, StopReason, Trajectory

MODULE = Path(__file__).resolve().parents[2] / "recipes" / "swe_explore" / "episodes.py"
spec = importlib.util.spec_from_file_location("swe_explore_episodes", MODULE)
episodes = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = episodes
spec.loader.exec_module(episodes)


def call(name: str) -> Message:
    return Message(role="assistant", content=f'<tool_call>\n{{"name": "{name}", "arguments": {{}}}}\n</tool_call>')


def episode(instance: str, calls: list[str], reward: float, stop: StopReason = StopReason.DONE) -> Trajectory:
    example = [Message(role="user", content="worked example"), call("edit_line"), Message(role="tool", content="ok")]
    messages = [Message(role="system", content="sys"), *example, Message(role="user", content="The test fails")]
    for name in calls:
        messages += [call(name), Message(role="tool", name=name, content=f"{name} output")]
    traj = Trajectory(group_id=instance, agent_name="swe_agent", messages=messages, reward=reward)
    traj.num_turns, traj.stop_reason = len(calls), stop
    traj.metadata = {"instance_id": instance, "model_patch": "--- a/x.py\n+++ b/x.py"}
    return traj


def test_the_figures_count_only_the_task_and_the_resolved_episodes() -> None:
    played = [
        episode("a", ["run_tests", "edit_line"], 1.0),
        episode("b", ["edit_line"], 1.0),  # the worked example's edit_line does not count as exploring first
        episode("c", ["run_tests", "run_tests", "view_lines"], 0.0, StopReason.TOOL_ERROR_LIMIT),
    ]
    played[2].metadata["context"] = {"compactions": [{"turn": 2, "tokens_before": 900, "tokens_after": 400}]}
    figures = episodes.summarize(played)
    assert figures["compacted"] == 1
    assert figures["resolved"] == 2 and figures["resolved_rate"] == pytest.approx(0.667)
    assert figures["resolved_mean_turns"] == 1.5 and figures["resolved_explored_first"] == 0.5
    assert figures["turns"] == {1: 1, 2: 1, 3: 1}
    assert figures["stop_reasons"] == {"done": 2, "tool_error_limit": 1}


def test_the_command_prints_the_figures_and_one_episode(tmp_path, capsys) -> None:
    path = tmp_path / "eval_step_0005.jsonl.gz"
    with gzip.open(path, "wt") as f:
        f.write(episode("a", ["run_tests", "edit_line"], 1.0).to_json() + "\n")
    assert episodes.main([str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["resolved_explored_first"] == 1.0
    assert episodes.main([str(path), "--show", "a"]) == 0
    shown = capsys.readouterr().out
    assert "worked example" not in shown and "The test fails" in shown and "`run_tests` answers" in shown
    assert "+++ b/x.py" in shown
    with pytest.raises(SystemExit):
        episodes.main([str(path), "--show", "b"])
    assert "the file holds: a" in capsys.readouterr().err
