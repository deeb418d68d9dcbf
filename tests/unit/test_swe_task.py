import json
from pathlib import Path

import pytest

from agentrl.data import load_samples
from agentrl.swe.task import SWEBENCH_ENV_SETUP, SWETask, TaskError, load_tasks, write_rows

RECIPE_DATA = Path(__file__).resolve().parents[2] / "recipes" / "swe_agent" / "data"

SWEBENCH_ROW = {  # the columns of a SWE-bench row, as the dataset ships them
    "repo": "astropy/astropy",
    "instance_id": "astropy__astropy-12907",
    "base_commit": "d16bfe05a744909de4b27f5875fe0d4ed41ce607",
    "patch": "diff --git a/x.py b/x.py\n",
    "test_patch": "diff --git a/t.py b/t.py\n",
    "problem_statement": "Modeling's separability_matrix does not compute separability correctly",
    "hints_text": "",
    "created_at": "2022-03-03T15:14:54Z",
    "version": "4.3",
    "FAIL_TO_PASS": '["astropy/modeling/tests/test_separable.py::test_separable[compound_model6-result6]"]',
    "PASS_TO_PASS": '["astropy/modeling/tests/test_separable.py::test_coord_matrix"]',
    "environment_setup_commit": "298ccb478e6bf092953bca67a3d29dc6c35f6752",
}


def test_raw_swebench_rows_are_training_data_as_they_ship(tmp_path):
    path = tmp_path / "swebench.jsonl"
    path.write_text(json.dumps(SWEBENCH_ROW) + "\n")
    (sample,) = load_samples(path)
    assert sample.id == "astropy__astropy-12907" and sample.data_source == "swe/astropy/astropy"
    assert sample.prompt[0].content == SWEBENCH_ROW["problem_statement"] and sample.agent_name is None
    task = SWETask.from_sample(sample)
    assert task.instance_id == "astropy__astropy-12907" and task.base_commit == SWEBENCH_ROW["base_commit"]
    assert task.FAIL_TO_PASS == ["astropy/modeling/tests/test_separable.py::test_separable[compound_model6-result6]"]


def test_swebench_row_loads_unchanged_with_json_string_test_lists(tmp_path):
    path = tmp_path / "swebench.jsonl"
    path.write_text(json.dumps(SWEBENCH_ROW) + "\n")
    (task,) = load_tasks(path)
    assert task.FAIL_TO_PASS == ["astropy/modeling/tests/test_separable.py::test_separable[compound_model6-result6]"]
    assert task.PASS_TO_PASS == ["astropy/modeling/tests/test_separable.py::test_coord_matrix"]
    assert task.image == "swebench/sweb.eval.x86_64.astropy_1776_astropy-12907:latest"
    assert task.setup_script == SWEBENCH_ENV_SETUP and task.repo_dir == "/testbed"


def test_parquet_rows_and_unknown_columns(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    row = {**SWEBENCH_ROW, "image_name": "swesmith.x86_64.foo", "version": 4.3, "extra_col": 1}
    pq.write_table(pa.Table.from_pylist([row]), tmp_path / "t.parquet")
    (task,) = load_tasks(tmp_path / "t.parquet")
    assert task.version == "4.3" and task.image == "swesmith.x86_64.foo" and task.setup_script == ""
    assert task.model_extra == {"extra_col": 1}


def test_bad_rows_say_which_field(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"instance_id": "x", "FAIL_TO_PASS": "[not json"}) + "\n")
    with pytest.raises(TaskError, match=r"row 0 .*problem_statement.*FAIL_TO_PASS|row 0 .*FAIL_TO_PASS"):
        load_tasks(path)
    with pytest.raises(TaskError, match="does not exist"):
        load_tasks(tmp_path / "missing.jsonl")


def test_rows_round_trip_through_the_dataset_loader(tmp_path):
    task = SWETask.from_row({**SWEBENCH_ROW, "image_name": "img:tag"})
    write_rows([task], tmp_path / "rows.jsonl")
    (sample,) = load_samples(tmp_path / "rows.jsonl")
    assert sample.agent_name == "swe_agent" and sample.id == task.instance_id
    assert sample.prompt[0].content == task.problem_statement
    assert SWETask.from_sample(sample) == task
    assert SWETask.from_sample(task.to_sample()) == task


@pytest.mark.skipif(not (RECIPE_DATA / "train.jsonl").exists(), reason="bundled tasks not generated")
def test_bundled_task_set():
    tasks = load_tasks(RECIPE_DATA / "train.jsonl") + load_tasks(RECIPE_DATA / "eval.jsonl")
    assert len(tasks) >= 20
    assert len({t.instance_id for t in tasks}) == len(tasks)
    assert len({t.repo for t in tasks}) >= 5
    for task in tasks:
        assert task.FAIL_TO_PASS and task.patch and task.test_patch and len(task.base_commit) == 40
        assert task.image_name and task.image_build and task.image_build["sdist"]
        hidden = {t.split("::")[0] for t in task.FAIL_TO_PASS}
        assert all(f"+++ b/{f}" in task.test_patch for f in hidden)  # the failing tests are hidden from the agent
        bug = task.image_build["bug"]  # the statement tells the symptom, not where the bug is
        assert "diff --git" not in task.problem_statement and bug["file"] not in task.problem_statement


def test_converter_cli_makes_training_rows(tmp_path, capsys):
    from agentrl.swe.task import main

    (tmp_path / "in.jsonl").write_text(json.dumps(SWEBENCH_ROW) + "\n")
    assert main([str(tmp_path / "in.jsonl"), str(tmp_path / "out.jsonl")]) == 0
    (sample,) = load_samples(tmp_path / "out.jsonl")
    assert sample.agent_name == "swe_agent" and SWETask.from_sample(sample).instance_id == "astropy__astropy-12907"
    assert main([str(tmp_path / "missing.jsonl"), str(tmp_path / "x.jsonl")]) == 2
