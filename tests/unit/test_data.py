import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from agentrl.data import DatasetError, load_datasets, load_samples


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_agentrl_rows(tmp_path):
    f = write_jsonl(
        tmp_path / "d.jsonl",
        [{"prompt": [{"role": "user", "content": "hi"}], "ground_truth": "x", "agent_name": "tool_agent"}],
    )
    (s,) = load_samples(f)
    assert s.prompt[0].content == "hi" and s.ground_truth == "x" and s.agent_name == "tool_agent"


def test_verl_style_columns(tmp_path):
    row = {
        "prompt": [{"role": "user", "content": "1+1?"}],
        "data_source": "gsm8k",
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": "2"},
        "extra_info": {"split": "train", "index": 0},
        "agent_name": "single_turn",
    }
    (s,) = load_samples(write_jsonl(tmp_path / "v.jsonl", [row]))
    assert s.ground_truth == "2" and s.data_source == "gsm8k"
    assert s.reward_spec == {"style": "rule"}
    assert s.extra_info == {"split": "train", "index": 0, "ability": "math"}


def test_string_prompt_becomes_user_message(tmp_path):
    (s,) = load_samples(write_jsonl(tmp_path / "s.jsonl", [{"prompt": "hello"}]))
    assert s.prompt[0].role == "user" and s.prompt[0].content == "hello"


def test_parquet(tmp_path):
    table = pa.Table.from_pylist(
        [
            {
                "prompt": [{"role": "user", "content": "a"}],
                "reward_model": {"ground_truth": "1", "style": "rule"},
            },
            {
                "prompt": [{"role": "user", "content": "b"}],
                "reward_model": {"ground_truth": "2", "style": "rule"},
            },
        ]
    )
    pq.write_table(table, tmp_path / "d.parquet")
    samples = load_samples(tmp_path / "d.parquet")
    assert [s.ground_truth for s in samples] == ["1", "2"]


def test_bad_row_names_file_row_and_field(tmp_path):
    f = write_jsonl(tmp_path / "bad.jsonl", [{"prompt": "ok"}, {"prompt": [{"role": "robot", "content": "x"}]}])
    with pytest.raises(DatasetError) as info:
        load_samples(f)
    msg = str(info.value)
    assert "bad.jsonl, row 1" in msg and "prompt.0.role" in msg


def test_missing_prompt(tmp_path):
    with pytest.raises(DatasetError, match=r"row 0: field prompt is missing"):
        load_samples(write_jsonl(tmp_path / "m.jsonl", [{"ground_truth": "x"}]))


def test_invalid_json_line(tmp_path):
    f = tmp_path / "j.jsonl"
    f.write_text('{"prompt": "a"}\n{not json\n')
    with pytest.raises(DatasetError, match=r"j.jsonl, line 2: not valid JSON"):
        load_samples(f)


def test_missing_file_and_unknown_format(tmp_path):
    with pytest.raises(DatasetError, match="does not exist"):
        load_samples(tmp_path / "none.jsonl")
    (tmp_path / "x.csv").write_text("a,b\n")
    with pytest.raises(DatasetError, match="use .jsonl or .parquet"):
        load_samples(tmp_path / "x.csv")


def test_load_datasets_concatenates(tmp_path):
    a = write_jsonl(tmp_path / "a.jsonl", [{"prompt": "1"}])
    b = write_jsonl(tmp_path / "b.jsonl", [{"prompt": "2"}, {"prompt": "3"}])
    assert [s.prompt[0].content for s in load_datasets([str(a), str(b)])] == ["1", "2", "3"]


def test_quickstart_data_loads():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "recipes" / "quickstart" / "data"
    assert len(load_samples(root / "train.jsonl")) > 0
    assert all(s.ground_truth for s in load_samples(root / "eval.jsonl"))
