"""Loading Harbor tasks: one folder, a folder of folders, a dataset.toml; errors name the file and the field."""

import pytest

from agentrl.config import load_config
from agentrl.config.loader import ConfigError
from agentrl.data import first_row_problem, load_samples
from agentrl.harbor.dataset import load_tasks, task_dirs
from agentrl.harbor.task import HarborTask, HarborTaskError, load_task, strip_canary
from agentrl.trainer.preflight import validate_run
from agentrl.types import Sample
from tests.unit.harbor_helpers import write_task


def test_a_task_folder_loads_with_its_config(tmp_path):
    task = load_task(write_task(tmp_path, "alpha"))
    assert task.name == "test/alpha" and task.path == tmp_path / "alpha"
    assert task.instruction == "Do the alpha thing.\n"
    assert task.config.agent.timeout_sec == 60.0 and task.config.verifier.timeout_sec == 30.0
    assert task.config.environment.cpus == 2 and task.config.environment.memory_mb == 4096
    assert task.config.environment.network_mode == "public"  # Harbor's default


def test_the_sample_carries_the_instruction_and_finds_the_task_again(tmp_path):
    sample = load_task(write_task(tmp_path, "alpha")).to_sample()
    assert sample.prompt[0].content == "Do the alpha thing.\n" and sample.agent_name == "harbor_agent"
    assert sample.id == "test/alpha" and sample.data_source == "harbor/test/alpha"
    assert HarborTask.from_sample(Sample.from_json(sample.to_json())).path == tmp_path / "alpha"


def test_name_defaults_to_the_folder_and_canary_lines_are_dropped(tmp_path):
    folder = write_task(tmp_path, "beta", toml="[agent]\ntimeout_sec = 5\n")
    (folder / "instruction.md").write_text("<!-- canary GUID 1234 -->\n# BENCHMARK DATA canary\n\nReal text\n")
    task = load_task(folder)
    assert task.name == "beta" and task.instruction == "Real text\n"
    assert strip_canary("no canary here\n") == "no canary here\n"


def test_harbor_deprecated_fields_are_migrated(tmp_path):
    toml = 'version = "1.0"\n[environment]\nmemory = "2G"\nstorage = "512M"\nallow_internet = false\n'
    config = load_task(write_task(tmp_path, "old", toml=toml)).config
    assert config.schema_version == "1.0"
    assert config.environment.memory_mb == 2048 and config.environment.storage_mb == 512
    assert config.environment.network_mode == "no-network"


def test_a_folder_of_task_folders_loads_in_name_order(tmp_path):
    for name in ("zeta", "alpha", "mid"):
        write_task(tmp_path, name)
    (tmp_path / "notes").mkdir()  # not a task: skipped
    assert [t.name for t in load_tasks(tmp_path)] == ["test/alpha", "test/mid", "test/zeta"]
    assert [s.id for s in load_samples(tmp_path)] == ["test/alpha", "test/mid", "test/zeta"]


def test_a_dataset_toml_names_its_tasks_by_package_name_or_folder(tmp_path):
    write_task(tmp_path, "alpha")
    write_task(tmp_path, "beta", toml="[agent]\ntimeout_sec = 5\n")  # no [task].name: found by folder
    write_task(tmp_path, "unlisted")
    manifest = tmp_path / "dataset.toml"
    manifest.write_text(
        '[dataset]\nname = "test/set"\n\n[[tasks]]\nname = "test/beta"\ndigest = "sha256:' + "0" * 64 + '"\n\n'
        '[[tasks]]\nname = "test/alpha"\ndigest = "sha256:' + "1" * 64 + '"\n'
    )
    assert task_dirs(manifest) == [tmp_path / "beta", tmp_path / "alpha"]
    assert task_dirs(tmp_path) == task_dirs(manifest)  # the folder holding a dataset.toml is that dataset
    assert [s.id for s in load_samples(manifest)] == ["beta", "test/alpha"]


def test_a_dataset_toml_naming_a_missing_task_says_which(tmp_path):
    write_task(tmp_path, "alpha")
    (tmp_path / "dataset.toml").write_text('[[tasks]]\nname = "test/alpha"\n[[tasks]]\nname = "test/gone"\n')
    with pytest.raises(HarborTaskError, match="test/gone") as err:
        task_dirs(tmp_path / "dataset.toml")
    assert "test/alpha" not in str(err.value).split("holds:")[1]
    (tmp_path / "dataset.toml").write_text("[dataset]\n")
    with pytest.raises(HarborTaskError, match="names no tasks"):
        task_dirs(tmp_path)


@pytest.mark.parametrize(
    ("missing", "named"),
    [
        ("task.toml", "task.toml is missing"),
        ("instruction.md", "instruction.md is missing"),
        ("environment/Dockerfile", "environment/Dockerfile is missing"),
        ("tests/test.sh", "tests/test.sh is missing"),
    ],
)
def test_a_missing_file_is_named(tmp_path, missing, named):
    folder = write_task(tmp_path, "alpha", skip=(missing,))
    with pytest.raises(HarborTaskError, match=named) as err:
        load_task(folder)
    assert str(folder) in str(err.value)


def test_a_prebuilt_image_makes_the_dockerfile_optional(tmp_path):
    toml = '[environment]\ndocker_image = "my/image:1"\n'
    task = load_task(write_task(tmp_path, "alpha", toml=toml, skip=("environment/Dockerfile",)))
    assert task.config.environment.docker_image == "my/image:1"


def test_bad_fields_are_named_with_their_section(tmp_path):
    toml = '[verifier]\ntimeout_sec = "soon"\n[environment]\ncpus = -1\n'
    with pytest.raises(HarborTaskError) as err:
        load_task(write_task(tmp_path, "alpha", toml=toml))
    assert "[verifier].timeout_sec" in str(err.value) and "[environment].cpus" in str(err.value)
    with pytest.raises(HarborTaskError, match="not valid TOML"):
        load_task(write_task(tmp_path, "beta", toml="[agent\n"))
    with pytest.raises(HarborTaskError, match="invalid size"):
        load_task(write_task(tmp_path, "gamma", toml='[environment]\nmemory = "lots"\n'))


def test_what_agentrl_cannot_run_is_refused_with_the_field(tmp_path):
    toml = (
        '[[steps]]\nname = "one"\n[environment]\nos = "Windows"\ngpus = 1\n[verifier]\nenvironment_mode = "separate"\n'
    )
    with pytest.raises(HarborTaskError) as err:
        load_task(write_task(tmp_path, "alpha", toml=toml))
    for field in ("[[steps]]", "[environment].os", "[environment].gpus", "[verifier]"):
        assert field in str(err.value)


def test_empty_or_missing_sources_fail_clearly(tmp_path):
    with pytest.raises(HarborTaskError, match="holds no Harbor task"):
        load_tasks(tmp_path)
    with pytest.raises(HarborTaskError, match="does not exist"):
        load_tasks(tmp_path / "dataset.toml")
    with pytest.raises(HarborTaskError, match="names no Harbor task"):
        HarborTask.from_sample(Sample(prompt=[], id="x"))


def test_run_validation_reports_broken_task_folders(tmp_path):
    write_task(tmp_path, "alpha", skip=("tests/test.sh",))
    assert "tests/test.sh is missing" in first_row_problem(tmp_path)
    with pytest.raises(ConfigError, match="tests/test.sh is missing"):
        validate_run(load_config(overrides=["recipe=harbor", f"data.train_files=[{tmp_path}]", "data.eval_files=[]"]))


def test_the_bundled_tasks_load():
    cfg = load_config(overrides=["recipe=harbor"])
    tasks = load_tasks(cfg.data.train_files[0])
    assert [t.name for t in tasks] == ["agentrl/fix-script", "agentrl/hello-file", "agentrl/word-count"]
    assert cfg.data.eval_files[0].endswith("dataset.toml")  # Harbor's manifest of the same tasks
    assert [t.path for t in load_tasks(cfg.data.eval_files[0])] == [t.path for t in tasks]
    for task in tasks:
        assert (task.solution_dir / "solve.sh").is_file()
        assert task.config.environment.network_mode == "no-network"
        assert task.dockerfile.read_text().startswith("FROM agentrl/sandbox:base")
