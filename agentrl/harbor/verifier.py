"""The verifier, as Harbor runs it: after the agent finished, in the agent's container, `tests/` is copied to
`/tests` and `bash /tests/test.sh` runs in the working folder with `[verifier].env`, its output going to
`/logs/verifier/test-stdout.txt`, under `[verifier].timeout_sec`. It leaves its reward in
`/logs/verifier/reward.json` (`{"name": number, ...}`, read first) or `/logs/verifier/reward.txt` (one number,
the key `reward`). Reward files the agent may have left are deleted before the tests run.

The primary reward is Harbor's: the key `reward`, else the only key; the others are its components. A task read
by Harbor's package (`HarborTask.reader == "harbor"`) is verified by Harbor's package too: its public
`Verifier.verify()` runs in one long-lived process (`agentrl.harbor.verify_client`) and drives the episode's
container through agentrl's sandbox. agentrl's own runner and parsers below follow the same rules.
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from agentrl.harbor.container import VERIFIER_LOGS, resolve_env, run_script
from agentrl.harbor.task import HarborTask
from agentrl.harbor.verify_client import harbor_verifier
from agentrl.sandbox.base import Sandbox

REWARD_TXT = f"{VERIFIER_LOGS}/reward.txt"
REWARD_JSON = f"{VERIFIER_LOGS}/reward.json"
TEST_STDOUT = f"{VERIFIER_LOGS}/test-stdout.txt"
TESTS_DIR = "/tests"


class RewardFileError(ValueError):
    """The verifier left no usable reward: files missing or empty, or values that are not finite numbers."""


@dataclass
class VerifierResult:
    """One run of a task's tests.

    Attributes:
        rewards: what reward.json / reward.txt hold (None when neither gave a reward).
        exit_code: test.sh's exit status.
        timed_out: test.sh ran past its timeout (its rewards are then not read).
        output: the end of test.sh's stdout and stderr.
        duration_s: wall time of copying the tests in and running them.
        error: why there is no reward.
        source: the file the rewards came from.
    """

    rewards: dict[str, float] | None
    exit_code: int
    timed_out: bool
    output: str
    duration_s: float
    error: str | None = None
    source: str | None = None

    def record(self) -> dict[str, Any]:
        """The result as JSON-safe trajectory metadata."""
        return asdict(self)


async def run_verifier(container: Sandbox, task: HarborTask, timeout_s: float) -> VerifierResult:
    """Run the task's tests in `container` (the agent's, after it finished) and read their reward.

    Raises:
        SandboxError: the container broke (a test that fails or hangs is a result, not an error).
        HarborTaskError: `[verifier].env` needs a variable this machine does not set.
    """
    started = time.perf_counter()
    env = resolve_env(task.config.verifier.env, f"{task.name}: [verifier].env")
    if task.reader == "harbor":
        return await _run_harbors_verifier(container, task, timeout_s, started)
    await container.exec(f"rm -f {REWARD_TXT} {REWARD_JSON}", timeout=30)
    run, output = await run_script(container, task.tests_dir, TESTS_DIR, "test.sh", timeout_s, env, TEST_STDOUT)
    result = VerifierResult(None, run.exit_code, run.timed_out, output, 0.0)
    if run.timed_out:
        result.error = f"tests/test.sh ran past its timeout of {timeout_s:g}s"
    else:
        try:
            result.rewards, result.source = await read_rewards(container)
        except RewardFileError as exc:
            result.error = str(exc)
    result.duration_s = time.perf_counter() - started
    return result


async def read_rewards(container: Sandbox) -> tuple[dict[str, float], str]:
    """The rewards the tests left, and the file they came from (reward.json first).

    Raises:
        RewardFileError: neither file exists, or the one read is empty or malformed.
    """
    for path, parse in ((REWARD_JSON, parse_reward_json), (REWARD_TXT, parse_reward_text)):
        try:
            data = await container.read_file(path)
        except FileNotFoundError:
            continue
        return parse(data.decode("utf-8", errors="replace")), path
    raise RewardFileError(f"tests/test.sh wrote no reward: neither {REWARD_TXT} nor {REWARD_JSON} exists")


async def _run_harbors_verifier(
    container: Sandbox, task: HarborTask, timeout_s: float, started: float
) -> VerifierResult:
    with tempfile.TemporaryDirectory(prefix="agentrl-harbor-trial-") as trial:
        done = await harbor_verifier().verify(container, task.path, Path(trial), timeout_s)
        logs = Path(trial) / "verifier"
        stdout = logs / "test-stdout.txt"
        output = stdout.read_bytes()[-8192:].decode("utf-8", errors="replace") if stdout.is_file() else ""
        source = REWARD_JSON if (logs / "reward.json").is_file() else REWARD_TXT
    result = VerifierResult(None, done.exit_code, done.timed_out, output, time.perf_counter() - started)
    if done.timed_out:
        result.error = f"tests/test.sh ran past its timeout of {timeout_s:g}s"
    elif done.error is not None:
        result.error = f"harbor: {done.error}"
    else:
        result.rewards = {str(k): float(v) for k, v in (done.rewards or {}).items()}
        result.source = source
    return result


def parse_reward_text(text: str) -> dict[str, float]:
    """reward.txt: one number, the reward.

    Raises:
        RewardFileError: empty, or not a finite number.
    """
    if not text.strip():
        raise RewardFileError(f"{REWARD_TXT} is empty; test.sh must write a number such as 1 or 0.5")
    try:
        value = float(text)
    except ValueError:
        raise RewardFileError(f"{REWARD_TXT} holds {text.strip()[:80]!r}, not a number") from None
    return {"reward": _finite(value, REWARD_TXT)}


def parse_reward_json(text: str) -> dict[str, float]:
    """reward.json: an object of named numbers (a bare number is the reward).

    Raises:
        RewardFileError: empty, not JSON, or a value that is not a finite number.
    """
    if not text.strip():
        raise RewardFileError(f'{REWARD_JSON} is empty; test.sh must write an object such as {{"reward": 1}}')
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RewardFileError(f"{REWARD_JSON} is not valid JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        data = {"reward": data}
    rewards = {}
    for key, value in data.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise RewardFileError(f"{REWARD_JSON}: {key} is {value!r}, not a number")
        rewards[str(key)] = _finite(float(value), f"{REWARD_JSON}: {key}")
    if not rewards:
        raise RewardFileError(f'{REWARD_JSON} holds no rewards; write an object such as {{"reward": 1}}')
    return rewards


def primary_reward(rewards: dict[str, float], key: str | None = None) -> float:
    """The reward: `rewards[key]` when a key is given, else Harbor's primary one (`reward`, else the only key).

    Raises:
        RewardFileError: the key is missing, or several rewards and none is called `reward`.
    """
    if key is not None:
        if key not in rewards:
            raise RewardFileError(f"the verifier reported no {key!r} reward (it reported {sorted(rewards)})")
        return rewards[key]
    if "reward" in rewards:
        return rewards["reward"]
    if len(rewards) == 1:
        return next(iter(rewards.values()))
    raise RewardFileError(
        f"the verifier reported several rewards ({sorted(rewards)}) and none called 'reward': set the reward "
        "component's `key` to the one to use"
    )


def _finite(value: float, where: str) -> float:
    if not math.isfinite(value):
        raise RewardFileError(f"{where} is {value}, not a finite number")
    return value
