"""Success per MiniWoB task from an eval run's results.jsonl."""

import json

import pytest

from agentrl.gui.report import main, read_results, success_by_task


def test_success_is_grouped_by_the_task_of_the_sample_id(tmp_path, capsys):
    rows = [
        {"id": "click-test/eval/1000", "resolved": True},
        {"id": "click-test/eval/1001", "resolved": False},
        {"id": "enter-text/eval/1000", "resolved": None},
    ]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert success_by_task(read_results(tmp_path)) == {
        "click-test": {"episodes": 2, "successes": 1, "success_rate": 0.5},
        "enter-text": {"episodes": 1, "successes": 0, "success_rate": 0.0},
    }
    assert main([str(tmp_path)]) == 0 and '"click-test"' in capsys.readouterr().out


def test_a_folder_without_results_says_which_folder_to_give(tmp_path):
    with pytest.raises(FileNotFoundError, match="give the run directory that `agentrl eval` printed"):
        read_results(tmp_path)
