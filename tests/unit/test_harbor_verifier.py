"""The verifier's reward files, Harbor's primary reward, and the harbor_task reward over the verifier's record."""

import asyncio
import math

import pytest

from agentrl.config.schema import RewardConfig
from agentrl.harbor import verifier
from agentrl.harbor.task import load_task
from agentrl.harbor.verifier import (
    RewardFileError,
    parse_reward_json,
    parse_reward_text,
    primary_reward,
    run_verifier,
)
from agentrl.rewards.base import RewardError, RewardInput
from agentrl.rewards.harbor import HarborTaskReward
from agentrl.rewards.pipeline import RewardPipeline
from agentrl.sandbox.base import ExecResult
from agentrl.types import Sample, StopReason, Trajectory
from tests.unit.harbor_helpers import write_task


def test_reward_txt_is_one_number():
    assert parse_reward_text("1\n") == {"reward": 1.0}
    assert parse_reward_text(" 0.25 ") == {"reward": 0.25}
    for bad, why in (("", "empty"), ("yes", "not a number"), ("nan", "not a finite number")):
        with pytest.raises(RewardFileError, match=why):
            parse_reward_text(bad)


def test_reward_json_is_named_numbers():
    assert parse_reward_json('{"reward": 1, "style": 0.5}') == {"reward": 1.0, "style": 0.5}
    assert parse_reward_json("0.75") == {"reward": 0.75}
    for bad, why in (
        ("", "empty"),
        ("{", "not valid JSON"),
        ('{"reward": "high"}', "not a number"),
        ('{"reward": true}', "not a number"),
        ('{"reward": NaN}', "not a finite number"),
        ("{}", "no rewards"),
    ):
        with pytest.raises(RewardFileError, match=why):
            parse_reward_json(bad)


def test_the_primary_reward_is_harbors():
    assert primary_reward({"reward": 0.5, "style": 1.0}) == 0.5
    assert primary_reward({"accuracy": 0.75}) == 0.75
    assert primary_reward({"reward": 0.5, "style": 1.0}, key="style") == 1.0
    with pytest.raises(RewardFileError, match="set the reward component's `key`"):
        primary_reward({"a": 1.0, "b": 0.0})
    with pytest.raises(RewardFileError, match="no 'style' reward"):
        primary_reward({"reward": 1.0}, key="style")


class FakeContainer:
    """Files by absolute path; `bash /tests/test.sh` runs `script`, a function of the files."""

    exec_timeout_s = 10.0
    workdir = "/app"

    def __init__(self, files=None, script=None, timed_out=False):
        self.files = dict(files or {})
        self.script = script or (lambda files: None)
        self.timed_out = timed_out
        self.commands: list[tuple[str, dict | None]] = []
        self.uploads: list[tuple[str, str]] = []

    async def exec(self, cmd, timeout=None, workdir=None, env=None):
        self.commands.append((cmd, env))
        if cmd.startswith("rm -f "):
            for path in cmd.split()[2:]:
                self.files.pop(path, None)
        elif cmd.startswith("bash /tests/test.sh"):
            self.script(self.files)
            return ExecResult(124 if self.timed_out else 0, "", "", timed_out=self.timed_out)
        elif cmd.startswith("tail"):
            return ExecResult(0, "PASS: all good\n", "")
        return ExecResult(0, "", "")

    async def upload_dir(self, local_dir, dest=None):
        self.uploads.append((str(local_dir), dest))

    async def read_file(self, path):
        if path not in self.files:
            raise FileNotFoundError(path)
        return self.files[path].encode()


def verify(tmp_path, container, toml=None):
    task = load_task(write_task(tmp_path, "t", toml=toml))
    return asyncio.run(run_verifier(container, task, timeout_s=5)), task


def test_the_verifier_runs_the_tests_and_reads_reward_json_first(tmp_path):
    def tests(files):
        files[verifier.REWARD_JSON] = '{"reward": 1, "partial": 0.5}'
        files[verifier.REWARD_TXT] = "0"

    container = FakeContainer(script=tests)
    result, task = verify(tmp_path, container, toml='[verifier]\nenv = {MODE = "strict"}\n')
    assert result.rewards == {"reward": 1.0, "partial": 0.5} and result.source == verifier.REWARD_JSON
    assert result.error is None and result.output == "PASS: all good\n"
    assert container.uploads == [(str(task.tests_dir), "/tests")]
    run = next((cmd, env) for cmd, env in container.commands if cmd.startswith("bash /tests/test.sh"))
    assert run == ("bash /tests/test.sh > /logs/verifier/test-stdout.txt 2>&1", {"MODE": "strict"})


def test_reward_files_the_agent_left_are_removed_before_the_tests(tmp_path):
    forged = {verifier.REWARD_TXT: "1"}
    result, _ = verify(tmp_path, FakeContainer(files=forged))  # the tests write nothing
    assert result.rewards is None and "wrote no reward" in result.error


def test_a_timed_out_verifier_gives_no_reward(tmp_path):
    container = FakeContainer(script=lambda f: f.update({verifier.REWARD_TXT: "1"}), timed_out=True)
    result, _ = verify(tmp_path, container)
    assert result.rewards is None and result.timed_out and "timeout of 5s" in result.error


def test_verifier_env_reads_templates_from_this_machine(tmp_path, monkeypatch):
    monkeypatch.setenv("JUDGE_KEY", "k-123")
    container = FakeContainer(script=lambda f: f.update({verifier.REWARD_TXT: "1"}))
    toml = '[verifier]\nenv = {KEY = "${JUDGE_KEY}", LEVEL = "${LEVEL:-3}"}\n'
    verify(tmp_path, container, toml=toml)
    envs = [env for cmd, env in container.commands if cmd.startswith("bash /tests")]
    assert envs == [{"KEY": "k-123", "LEVEL": "3"}]


def scored(record=None, key=None, harbor=None, stop=StopReason.DONE, error=None):
    traj = Trajectory(stop_reason=stop, error=error)
    if harbor is not None or record is not None:
        traj.metadata["harbor"] = {"task": "t", **(harbor or {}), **({"verifier": record} if record else {})}
    inp = RewardInput(trajectory=traj, sample=Sample(prompt=[]), answer="")
    return asyncio.run(HarborTaskReward(key=key).ascore(inp))


def record(rewards, error=None):
    return {"rewards": rewards, "exit_code": 0, "timed_out": False, "output": "ok\n" * 5000, "duration_s": 1.23456,
            "error": error, "source": verifier.REWARD_JSON}  # fmt: skip


def test_harbor_task_scores_the_verifiers_record():
    result = scored(record({"reward": 1.0, "partial": 0.5}))
    assert result.score == 1.0 and result.details["resolved"] is True
    assert result.details["rewards"] == {"reward": 1.0, "partial": 0.5}
    assert result.details["test_output"].endswith("ok\n") and len(result.details["test_output"]) == 4000
    assert scored(record({"reward": 1.0, "partial": 0.5}), key="partial").details["resolved"] is False


def test_harbor_task_fails_with_the_reason_when_there_is_no_reward():
    with pytest.raises(RewardError, match="wrote no reward") as err:
        scored(record(None, error="tests/test.sh wrote no reward"))
    assert err.value.details["resolved"] is False and err.value.details["exit_code"] == 0
    with pytest.raises(RewardError, match="agent.name=harbor_agent"):
        scored(None)
    with pytest.raises(RewardError, match="ended first.*boom"):
        scored(harbor={"limits": {}}, stop=StopReason.SERVER_ERROR, error="boom")


def test_the_pipeline_records_a_failed_verifier_as_unresolved_zero():
    pipeline = RewardPipeline(RewardConfig(components=[{"name": "tests", "type": "harbor_task"}]))
    traj = Trajectory(stop_reason=StopReason.DONE)
    traj.metadata["harbor"] = {"task": "t", "verifier": record(None, error="tests/test.sh wrote no reward")}
    assert pipeline.score(traj, Sample(prompt=[])) == 0.0
    assert traj.success is False and "wrote no reward" in traj.reward_details["tests"]["error"]
    assert not math.isnan(traj.reward)
