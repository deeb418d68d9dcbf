"""Harbor tasks read through Harbor's own package (`harbor`, which `make setup` installs in .venv-harbor/ with
Python 3.12): its `Task` reads the folders, its `DatasetManifest` the manifest, its `Verifier` verifies (one
long-lived process driving agentrl's containers). Harbor's reading and scoring against agentrl's own, and one
training step."""

from __future__ import annotations

import asyncio
import gzip
import json
import shlex
import shutil
from pathlib import Path

import pytest

from agentrl.cli import main
from agentrl.config import load_config
from agentrl.config.schema import SandboxConfig
from agentrl.harbor import package
from agentrl.harbor.container import open_task_container
from agentrl.harbor.dataset import load_tasks
from agentrl.harbor.limits import task_limits
from agentrl.harbor.package import harbor_python
from agentrl.harbor.task import HarborTaskError, load_task
from agentrl.harbor.verifier import run_verifier
from agentrl.harbor.verify_client import harbor_verifier
from agentrl.loops.preflight import data_problems
from agentrl.types import Trajectory

HELLO_FILE = Path(__file__).resolve().parents[2] / "recipes" / "harbor" / "tasks" / "hello-file"
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(harbor_python() is None, reason="no Python 3.12+ here for Harbor's package (make setup)"),
]


@pytest.mark.parametrize("source", ["train_files", "eval_files"])  # the tasks/ folder, and its dataset.toml
def test_harbor_reads_the_bundled_tasks_as_agentrls_reader_does(source) -> None:
    (path,) = getattr(load_config(overrides=["recipe=harbor"]).data, source)
    by_harbor, by_agentrl = load_tasks(path, "harbor"), load_tasks(path, "agentrl")
    assert [t.name for t in by_harbor] == ["agentrl/fix-script", "agentrl/hello-file", "agentrl/word-count"]
    assert {t.reader for t in by_harbor} == {"harbor"}
    assert [t.model_copy(update={"reader": "agentrl"}) for t in by_harbor] == by_agentrl
    sample = by_harbor[0].to_sample()  # the episode reads its task again, with the same reader
    assert sample.extra_info["harbor"]["reader"] == "harbor"


def write_task(folder, files) -> None:
    for rel, text in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)


def test_harbors_refusals_and_agentrls_limits_reach_the_user(tmp_path) -> None:
    write_task(tmp_path / "no-tests", {"instruction.md": "x\n", "task.toml": "", "environment/Dockerfile": "FROM a\n"})
    with pytest.raises(HarborTaskError, match=r"harbor refused it: .*test"):
        load_task(tmp_path / "no-tests", "harbor")
    write_task(tmp_path / "gpu", {
        "instruction.md": "x\n", "task.toml": "[environment]\ngpus = 1\n", "environment/Dockerfile": "FROM a\n",
        "tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n",
    })  # fmt: skip
    with pytest.raises(HarborTaskError, match="task sandboxes have no GPUs"):  # Harbor takes it; agentrl cannot
        load_task(tmp_path / "gpu", "harbor")
    cfg = load_config(overrides=["recipe=harbor", "data.harbor_reader=harbor", f"data.train_files=[{tmp_path}/gpu]"])
    assert any("no GPUs" in problem for problem in data_problems(cfg))


REWARD_FILES = [
    {"reward.txt": b"0.5\n"},
    {"reward.json": b'{"reward": 1, "file_exists": 1, "is_number": 0.25}'},
    {"reward.json": b'{"score": 0.75}', "reward.txt": b"0"},  # reward.json is read first
    {"reward.txt": b"nan"},
    {"reward.txt": b""},
    {"reward.json": b"[1"},
    {},
]


def task_writing(folder, files: dict[str, bytes], then: str = ""):
    """A copy of the bundled hello-file task (its image is reused) whose tests write `files` as rewards."""
    shutil.copytree(HELLO_FILE, folder)
    writes = "".join(f"printf '%s' {shlex.quote(d.decode())} > /logs/verifier/{n}\n" for n, d in files.items())
    (folder / "tests" / "test.sh").write_text(f"#!/bin/bash\necho checking\n{writes}{then}")
    return load_task(folder, "harbor")


def test_harbors_verifier_runs_in_one_process_and_scores_as_agentrls(tmp_path, no_leftovers) -> None:
    """Harbor's `Verifier.verify()` drives agentrl's container through one long-lived process: the same rewards,
    refusals, exit code and output as agentrl's own verifier for each reward file, and a test.sh that hangs ends
    at the verifier's timeout with the process still serving."""
    sandbox = SandboxConfig(backend="docker")

    async def play():
        base = load_task(HELLO_FILE, "harbor")
        container = await open_task_container(base, task_limits(base, sandbox), sandbox, "harbor-verify-test")
        try:
            pairs = []
            for i, files in enumerate(REWARD_FILES):
                task = task_writing(tmp_path / f"case{i}", files)
                ours = await run_verifier(container, task.model_copy(update={"reader": "agentrl"}), 30)
                pairs.append((ours, await run_verifier(container, task, 30)))
            server = harbor_verifier().process.pid
            hang = task_writing(tmp_path / "hang", {"reward.txt": b"1"}, then="sleep 60\n")
            hung = await run_verifier(container, hang, 2)
            after = await run_verifier(container, task_writing(tmp_path / "after", {"reward.txt": b"1"}), 30)
            return pairs, server, hung, after
        finally:
            await container.close()

    pairs, server, hung, after = asyncio.run(play())
    for ours, harbors in pairs:
        assert harbors.rewards == ours.rewards and (harbors.error is None) == (ours.error is None), (ours, harbors)
        assert (harbors.exit_code, harbors.output, harbors.source) == (ours.exit_code, ours.output, ours.source)
        assert harbors.error is None or harbors.error.startswith("harbor: ")
    assert [h.rewards for _, h in pairs][:3] == [{"reward": 0.5}, {"reward": 1, "file_exists": 1, "is_number": 0.25},
                                                  {"score": 0.75}]  # fmt: skip
    assert hung.timed_out and hung.rewards is None and "past its timeout of 2s" in hung.error
    assert hung.duration_s < 30 and after.rewards == {"reward": 1.0}
    assert harbor_verifier().process.pid == server  # one process served every verification


def test_a_task_read_by_harbor_rolls_out_and_trains_a_step(hf_server_url, tmp_path, no_leftovers) -> None:
    args = [
        "train", "recipe=harbor", "data.harbor_reader=harbor", "data.train_files=[tasks/hello-file]",
        "data.eval_files=[]", "data.batch_size=1", "rollout.n=2", "trainer.steps=1", "trainer.eval_every=0",
        f"rollout.urls=[{hf_server_url}]", "rollout.max_tokens=96", "rollout.max_model_len=2048",
        "agent.max_turns=2", "agent.max_total_tokens=2048", f"output_dir={tmp_path}",
    ]  # fmt: skip
    assert main(args) == 0
    (metrics,) = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert metrics["rollout/trajectories"] == 2.0 and "train/loss" in metrics
    with gzip.open(tmp_path / "trajectories" / "step_0001.jsonl.gz", "rt") as f:
        played = [Trajectory.from_json(line) for line in f]
    for traj in played:
        harbor = traj.metadata["harbor"]
        assert harbor["reader"] == "harbor" and harbor["verifier"]["source"] == "/logs/verifier/reward.txt"
        assert traj.reward_components["tests"] == harbor["verifier"]["rewards"]["reward"] in (0.0, 1.0)


def test_a_missing_package_is_refused_at_start(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(package, "CHECKOUT_VENV", tmp_path / "none")
    monkeypatch.delenv("AGENTRL_HARBOR_PYTHON", raising=False)
    assert main(["train", "recipe=harbor", "data.harbor_reader=harbor", f"output_dir={tmp_path}/run"]) == 2
    assert "no Python has the `harbor` package" in capsys.readouterr().err
