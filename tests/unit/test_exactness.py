"""The exactness contract: settings refused at start, the top-p/top-k warning, and each step's exactness metrics."""

from __future__ import annotations

import pytest

from agentrl.config import AgentRLConfig
from agentrl.config.loader import ConfigError
from agentrl.config.schema import TrainerConfig
from agentrl.trainer.batch import UntrainableSegmentError
from agentrl.trainer.engine import PolicyEngine
from agentrl.trainer.exactness import check_batch, exactness_breaches, exactness_metrics, truncation_warning
from agentrl.trainer.loop import prepare_config
from agentrl.trainer.step import policy_step
from agentrl.types import Segment, Trajectory
from tests.tiny_models import tiny_llama


def config(**sections) -> AgentRLConfig:
    return AgentRLConfig.model_validate(sections)


def test_greedy_training_and_regenerate_outside_fully_async_are_refused_at_start():
    with pytest.raises(ConfigError, match="rollout.temperature=0 is greedy"):
        prepare_config(config(rollout={"temperature": 0.0}))
    with pytest.raises(ConfigError, match="stale_samples=regenerate"):
        prepare_config(config(trainer={"mode": "async", "stale_samples": "regenerate"}))
    prepare_config(config(rollout={"temperature": 0.7}, trainer={"mode": "fully_async", "stale_samples": "regenerate"}))


def test_top_p_and_top_k_get_one_warning_line_that_says_how_to_train_exactly():
    assert truncation_warning(config()) is None
    line = truncation_warning(config(rollout={"top_p": 0.9}))
    assert line is not None and "\n" not in line and "top_p=1 and top_k=-1 train exactly" in line
    assert "set trainer.tis_cap" in line
    assert "corrects it" in (truncation_warning(config(rollout={"top_k": 20}, trainer={"tis_cap": 2.0})) or "")


def trajectory(*versions: int | None, group: str = "g", reward: float = 0.0) -> Trajectory:
    segments = [Segment(token_ids=[1, 2, 3], trainable=False)]
    for k, version in enumerate(versions):
        segments.append(Segment(token_ids=[4 + k, 5], trainable=True, logprobs=[-1.0, -1.0], policy_version=version))
        segments.append(Segment(token_ids=[9], trainable=False, role="tool"))
    return Trajectory(segments=segments, group_id=group, reward=reward)


def test_version_share_staleness_and_mismatch_by_lag():
    step = {"train/mismatch_by_version/3": 0.25, "train/mismatch_by_version/4": 0.5, "train/loss": 1.0}
    metrics = exactness_metrics([trajectory(3, 4), trajectory(4, None)], version=4, step_metrics=step)
    assert metrics["rollout/version_known"] == pytest.approx(3 / 4)
    assert metrics["train/mismatch_lag/1"] == 0.25 and metrics["train/mismatch_lag/0"] == 0.5
    assert step == {"train/loss": 1.0}  # the per-version figures became per-lag ones
    breaches = exactness_breaches({**metrics, "rollout/staleness_max": 1.0}, max_staleness=0, stale_samples="drop")
    assert set(breaches) == {"version", "staleness"}
    assert "have no version from the server that generated them: 25.0% (the policy)" in breaches["version"]
    assert exactness_breaches({"rollout/version_known": 1.0, "rollout/staleness_max": 1.0}, 1, "drop") == {}


def test_a_segment_without_logprobs_stops_the_step_naming_the_backend():
    segments = [Segment(token_ids=[1], trainable=False), Segment(token_ids=[2, 3], trainable=True)]
    with pytest.raises(UntrainableSegmentError, match="without logprobs \\(the vllm server returned none\\)"):
        check_batch([Trajectory(segments=segments)], "vllm")
    check_batch([trajectory(0)], "vllm")  # logprobs and a version: nothing to say


def test_policy_step_reports_the_mismatch_of_each_version_s_tokens():
    engine = PolicyEngine(tiny_llama())
    rows = [trajectory(0, 1, group="a", reward=1.0), trajectory(1, group="a"), trajectory(0, group="b", reward=1.0)]
    rows.append(trajectory(0, group="b"))
    metrics = policy_step(engine, TrainerConfig(), rows, 0)
    by_version = {k: v for k, v in metrics.items() if k.startswith("train/mismatch_by_version/")}
    assert set(by_version) == {"train/mismatch_by_version/0", "train/mismatch_by_version/1"}
    # every rollout logprob is -1.0 here, so each version's figure is its tokens' mean |-1 - trainer logprob|
    assert all(v > 0 for v in by_version.values())
    tokens = {0: 6, 1: 4}
    overall = sum(by_version[f"train/mismatch_by_version/{v}"] * n for v, n in tokens.items()) / 10
    assert overall == pytest.approx(metrics["train/rollout_logprob_abs_diff"], rel=1e-5)
