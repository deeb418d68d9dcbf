"""Rows of SWE-Gym, SWE-smith and R2E-Gym (in their published column layouts) and SWE-bench's variants load
unchanged from JSONL and Parquet, with each dataset's image naming; a row missing a column names it."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from agentrl.data import DatasetError, load_samples
from agentrl.swe.formats import detect, format_of_source, swe_smith_image
from agentrl.swe.images import how_to_get
from agentrl.swe.task import SWEBENCH_ENV_SETUP, SWETask, TaskError, load_tasks, write_rows

SWE_GYM = {  # SWE-Gym/SWE-Gym: SWE-bench's columns, other repositories
    "instance_id": "getmoto__moto-5752",
    "hints_text": "",
    "patch": "diff --git a/moto/ssm/models.py b/moto/ssm/models.py\n",
    "test_patch": "diff --git a/tests/test_ssm/test_ssm_boto3.py b/tests/test_ssm/test_ssm_boto3.py\n",
    "created_at": "2022-12-10 20:23:01",
    "problem_statement": "Describe Parameters filter by tag does not work",
    "repo": "getmoto/moto",
    "base_commit": "b2300f1eae1323e3e8bc45f97e530ce129dff12e",
    "version": "4.0",
    "PASS_TO_PASS": '["tests/test_ssm/test_ssm_boto3.py::test_get_parameter"]',
    "FAIL_TO_PASS": '["tests/test_ssm/test_ssm_boto3.py::test_describe_parameters__multiple_tags"]',
}
BUG = "diff --git a/oauthlib/common.py b/oauthlib/common.py\n--- a/oauthlib/common.py\n+++ b/oauthlib/common.py\n"
SWE_SMITH = {  # SWE-bench/SWE-smith
    "instance_id": "oauthlib__oauthlib.1fd52536.combine_file__09vlzwgc",
    "repo": "swesmith/oauthlib__oauthlib.1fd52536",
    "patch": BUG,
    "FAIL_TO_PASS": ["tests/test_common.py::CommonTests::test_urldecode"],
    "PASS_TO_PASS": ["tests/test_common.py::CommonTests::test_add_params_to_uri"],
    "created_at": "2025-03-14T22:01:47.123456",
    "image_name": "jyangballin/swesmith.x86_64.oauthlib_1776_oauthlib.1fd52536",
    "base_commit": "7f5a2b3e9c1d4a6b8e0f2c4d6a8b0c2e4f6a8b0c",
    "problem_statement": "urldecode no longer decodes plus signs",
}
R2E_GYM = {  # R2E-Gym/R2E-Gym-Lite
    "repo_name": "aiohttp",
    "docker_image": "namanjain12/aiohttp_final:f0d74880deec8fcd982bce639c93c5e130d41198",
    "commit_hash": "f0d74880deec8fcd982bce639c93c5e130d41198",
    "parsed_commit_content": json.dumps(
        {"old_commit_hash": "1f97c55a93c4dd7e7dfe9b5850bd6d0e0f614b8e", "new_commit_hash": "f0d74880", "file_diffs": []}
    ),
    "execution_result_content": json.dumps({"repo_name": "aiohttp", "new_commit_hash": "f0d74880"}),
    "modified_files": ["aiohttp/web_response.py"],
    "modified_entity_summaries": [],
    "relevant_files": ["aiohttp/web_response.py"],
    "num_non_test_files": 1,
    "num_non_test_func_methods": 1,
    "num_non_test_lines": 4,
    "prompt": "Write an issue for this commit. The diff: -    return x\n+    return y",
    "problem_statement": "[ISSUE]\nResponse.charset is lost after set_cookie\n[/ISSUE]",
    "expected_output_json": json.dumps({"TestResponse.test_charset": "PASSED"}),
}
SWE_BENCH = {  # SWE-bench (full, Lite, Verified), as the swebench package publishes it for version 5
    "repo": "django/django",
    "instance_id": "django__django-11099",
    "base_commit": "d26b2424437dabeeca94d7900b37d2df4410da0c",
    "patch": "diff --git a/django/contrib/auth/validators.py b/django/contrib/auth/validators.py\n",
    "test_patch": "diff --git a/tests/auth_tests/test_validators.py b/tests/auth_tests/test_validators.py\n",
    "problem_statement": "UsernameValidator allows trailing newline in usernames",
    "hints_text": "",
    "created_at": "2019-03-20T03:46:18Z",
    "version": "3.0",
    "FAIL_TO_PASS": '["test_ascii_validator (auth_tests.test_validators.UsernameValidatorsTests)"]',
    "PASS_TO_PASS": "[]",
    "environment_setup_commit": "419a78300f7cd27611196e1e464d50fd0385ff27",
}


def write(path, rows):
    if path.suffix == ".parquet":
        pq.write_table(pa.Table.from_pylist(rows), path)
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_swe_gym_rows_load_named_with_their_image(tmp_path, suffix):
    path = write(tmp_path / f"gym{suffix}", [SWE_GYM])
    (task,) = load_tasks(path, row_format="swe-gym")
    assert task.row_format == "swe-gym" and task.base_commit == SWE_GYM["base_commit"]
    assert task.image == "xingyaoww/sweb.eval.x86_64.getmoto_s_moto-5752:latest"
    assert task.setup_script == SWEBENCH_ENV_SETUP
    assert task.FAIL_TO_PASS == ["tests/test_ssm/test_ssm_boto3.py::test_describe_parameters__multiple_tags"]
    # As training data, a data source naming the dataset names the format.
    (sample,) = load_samples(write(tmp_path / "named.jsonl", [{**SWE_GYM, "data_source": "SWE-Gym/SWE-Gym"}]))
    assert SWETask.from_sample(sample).image == task.image and sample.prompt[0].content == SWE_GYM["problem_statement"]


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_swe_smith_rows_load_as_the_bug_on_the_image(tmp_path, suffix):
    path = write(tmp_path / f"smith{suffix}", [SWE_SMITH])
    (task,) = load_tasks(path)  # told by its columns: an image name and no test patch
    assert task.row_format == "swe-smith" and task.image == SWE_SMITH["image_name"]
    assert task.start_patch == BUG and task.patch == "" and task.base_commit == ""
    assert task.model_extra["bug_commit"] == SWE_SMITH["base_commit"]
    assert task.setup_script == SWEBENCH_ENV_SETUP
    assert task.FAIL_TO_PASS == ["tests/test_common.py::CommonTests::test_urldecode"]


def test_swe_smith_image_names():
    bare = "swesmith.x86_64.oauthlib__oauthlib.1fd52536"  # as early rows name it
    assert swe_smith_image(bare) == "jyangballin/swesmith.x86_64.oauthlib_1776_oauthlib.1fd52536"
    assert swe_smith_image("swebench/swesmith.x86_64.pallets_1776_flask.bc098406") == (
        "swebench/swesmith.x86_64.pallets_1776_flask.bc098406"
    )


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_r2e_gym_rows_load_without_their_generation_prompt(tmp_path, suffix):
    path = write(tmp_path / f"r2e{suffix}", [R2E_GYM])
    (task,) = load_tasks(path)
    assert task.row_format == "r2e-gym" and task.instance_id == "aiohttp-f0d74880deec"
    assert task.image == R2E_GYM["docker_image"] and task.repo == "aiohttp"
    assert task.problem_statement == "Response.charset is lost after set_cookie"
    assert "prompt" not in task.model_extra  # it holds the fix
    assert task.model_extra["old_commit"] == "1f97c55a93c4dd7e7dfe9b5850bd6d0e0f614b8e"
    (sample,) = load_samples(path)  # as training data: the issue is the prompt, never R2E's `prompt` column
    assert sample.prompt[0].content == task.problem_statement and "return y" not in str(sample.model_dump())
    assert SWETask.from_sample(sample) == task


def test_swebench_rows_of_every_variant_load(tmp_path):
    verified = {**SWE_BENCH, "difficulty": "<15 min fix"}
    image = "swebench/sweb.eval.x86_64.django_1776_django-11099:v2"
    swebench5 = {**SWE_BENCH, "image": image, "eval_script": "#!/bin/bash\n", "log_parser": "parse_log_django"}
    assets = json.dumps({"test_patch": [{"path": "test/fixtures/a.png", "url": "u"}]})
    multimodal = {
        **SWE_BENCH,
        "repo": "chartjs/Chart.js",
        "instance_id": "chartjs__Chart.js-11116",
        "image_assets": assets,
    }
    tasks = load_tasks(write(tmp_path / "sb.parquet", [SWE_BENCH, verified]))
    tasks += load_tasks(write(tmp_path / "sb5.jsonl", [swebench5, multimodal]))
    assert [t.row_format for t in tasks] == ["swe-bench"] * 4
    assert tasks[0].image == "swebench/sweb.eval.x86_64.django_1776_django-11099:latest"
    assert tasks[2].image == swebench5["image"] and tasks[3].model_extra["image_assets"]
    assert tasks[0].FAIL_TO_PASS == ["test_ascii_validator (auth_tests.test_validators.UsernameValidatorsTests)"]


@pytest.mark.parametrize(
    ("row", "row_format", "column"),
    [
        (SWE_GYM, "swe-gym", "test_patch"),
        (SWE_SMITH, None, "FAIL_TO_PASS"),
        (R2E_GYM, None, "expected_output_json"),
        (SWE_BENCH, "swe-bench", "environment_setup_commit"),
    ],
)
def test_a_row_missing_a_column_names_it(tmp_path, row, row_format, column):
    path = write(tmp_path / "rows.jsonl", [{k: v for k, v in row.items() if k != column}])
    with pytest.raises(TaskError, match=rf"rows.jsonl, row 0: a [a-z0-9-]+ row needs the column\(s\) {column}\b"):
        load_tasks(path, row_format=row_format)
    if row_format is None:  # as training data too
        with pytest.raises(DatasetError, match=column):
            load_samples(path)


def test_formats_are_named_or_told_by_their_columns_never_by_a_repo(tmp_path):
    assert [detect(r) for r in (SWE_BENCH, SWE_SMITH, R2E_GYM)] == ["swe-bench", "swe-smith", "r2e-gym"]
    assert detect({"instance_id": "django__django-1", "repo": "django/django", "problem_statement": "x"}) is None
    assert [format_of_source(s) for s in ("princeton-nlp/SWE-bench_Lite", "SWE-bench/SWE-smith", "swe/django/x")] == [
        "swe-bench", "swe-smith", None
    ]  # fmt: skip
    with pytest.raises(TaskError, match="unknown row format 'swe-gum'; use one of swe-bench, swe-gym, swe-smith"):
        load_tasks(write(tmp_path / "x.jsonl", [SWE_GYM]), row_format="swe-gum")


def test_mapped_rows_round_trip(tmp_path):
    tasks = [SWETask.from_row(SWE_SMITH), SWETask.from_row(R2E_GYM), SWETask.from_row(SWE_GYM, row_format="swe-gym")]
    write_rows(tasks, tmp_path / "rows.jsonl")
    assert [SWETask.from_sample(s) for s in load_samples(tmp_path / "rows.jsonl")] == tasks


def test_a_missing_image_says_how_to_get_it():
    swebench = SWETask.from_row(SWE_BENCH)
    assert "docker pull swebench/sweb.eval.x86_64.django_1776_django-11099:latest" in how_to_get(swebench)
    assert "--pull" in how_to_get(swebench) and "swebench images build" in how_to_get(swebench)
    bundled = SWETask(instance_id="a__b-1", problem_statement="x", image_build={"sdist": "toolz==1.0.0"})
    assert how_to_get(bundled).startswith("build it: python -m agentrl.swe.images")


class FakeImages:
    """The local engine's images (`client.images`), recording pulls; `pullable` is what the registry has."""

    def __init__(self, local: set[str], pullable: set[str]):
        self.local, self.pullable, self.pulls = set(local), pullable, []

    def get(self, name):
        import docker

        if name not in self.local:
            raise docker.errors.ImageNotFound(name)
        return name

    def pull(self, repository, tag):
        import docker

        self.pulls.append(f"{repository}:{tag}")
        if f"{repository}:{tag}" not in self.pullable:
            raise docker.errors.APIError("pull access denied")
        self.local.add(f"{repository}:{tag}")


def test_images_are_pulled_only_when_asked(tmp_path, monkeypatch, capsys):
    from types import SimpleNamespace

    from agentrl.sandbox import images as sandbox_images
    from agentrl.swe.images import main

    gym_image = "xingyaoww/sweb.eval.x86_64.getmoto_s_moto-5752:latest"
    fake = SimpleNamespace(images=FakeImages(local={SWE_SMITH["image_name"]}, pullable={gym_image}))
    monkeypatch.setattr(sandbox_images, "_client", lambda: fake)
    path = write(tmp_path / "gym.jsonl", [SWE_GYM])
    assert main([str(path), "--format", "swe-gym"]) == 1  # missing, and listed with how to get it
    assert fake.images.pulls == [] and f"missing: {gym_image}" in capsys.readouterr().err
    assert main([str(path), "--format", "swe-gym", "--pull"]) == 0
    assert fake.images.pulls == [gym_image]
    assert main([str(write(tmp_path / "smith.jsonl", [SWE_SMITH])), "--pull"]) == 0  # present: not pulled again
    assert fake.images.pulls == [gym_image]
    r2e = write(tmp_path / "r2e.jsonl", [R2E_GYM])
    assert main([str(r2e), "--pull"]) == 1 and "cannot pull namanjain12/aiohttp_final" in capsys.readouterr().err
