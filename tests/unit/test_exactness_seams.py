"""Seams of the exactness contract: per-policy version checks, one staleness rule for tokens of unknown version,
a breach that stops the run, and a fully_async bound that holds by default."""

from __future__ import annotations

import pytest

from agentrl.config import AgentRLConfig
from agentrl.config.schema import TrainerConfig
from agentrl.trainer.continuous import ContinuousCollector
from agentrl.trainer.exactness import exactness_breaches
from agentrl.trainer.loop import Trainer
from agentrl.trainer.staleness import STARTED_VERSION, staleness
from agentrl.types import Message, Sample, Segment, Trajectory


def generated(version: int | None, started: int | None = None) -> Trajectory:
    traj = Trajectory(
        group_id="g",
        segments=[
            Segment(token_ids=[1, 2], trainable=False),
            Segment(token_ids=[3, 4], trainable=True, logprobs=[-1.0, -1.0], policy_version=version),
        ],
    )
    if started is not None:
        traj.metadata[STARTED_VERSION] = started
    return traj


def test_a_policy_with_tokens_of_unknown_version_is_a_breach():
    metrics = {"rollout/solver/version_known": 1.0, "rollout/judge/version_known": 0.5}
    breaches = exactness_breaches(metrics, max_staleness=1, stale_samples="drop")
    assert "version" in breaches and "judge" in breaches["version"]


def test_a_token_of_unknown_version_is_never_fresh_and_both_rules_agree():
    samples = [Sample(prompt=[Message(role="user", content="hi")])]
    collector = ContinuousCollector(None, None, samples, 1, TrainerConfig(), lambda: 5, max_groups_in_flight=1)
    unknown = generated(None, started=2)
    assert staleness(unknown, 5) == collector.lag([unknown]) == 3  # no newer than the version its group started at
    assert staleness(generated(None), 5) == 5  # nothing known at all: as old as can be
    mixed = generated(4, started=2)
    mixed.append(Segment(token_ids=[5], trainable=True, logprobs=[-1.0], policy_version=None))
    assert staleness(mixed, 5) == collector.lag([mixed]) == 3


def test_a_breach_stops_the_run_by_default_with_its_message():
    trainer = Trainer.__new__(Trainer)
    trainer.cfg, trainer._breaches = AgentRLConfig(), set()
    with pytest.raises(Exception, match="have no version from the server"):
        trainer._check_exactness({"rollout/version_known": 0.5}, step=3)


def test_the_staleness_bound_holds_by_default():
    assert TrainerConfig().stale_samples != "correct"


def test_config_show_shows_a_bounded_stale_samples_and_stop_on_breach_by_default(capsys):
    from agentrl.cli import main

    assert main(["config", "show", "trainer.mode=fully_async"]) == 0
    shown = capsys.readouterr().out
    assert "stale_samples: drop" in shown and "on_breach: stop" in shown


def test_each_policy_s_known_versions_are_read_before_the_update():
    from agentrl.trainer.policies import Policies, PolicyRuntime

    def turn(policy: str, version: int | None) -> Segment:
        return Segment(token_ids=[7, 8], trainable=True, logprobs=[-1.0, -1.0], policy_version=version, policy=policy)

    episode = Trajectory(segments=[Segment(token_ids=[1], trainable=False), turn("solver", 3), turn("judge", None)])
    policies = Policies.__new__(Policies)
    policies.several = True
    policies.runtimes = [PolicyRuntime(name, AgentRLConfig(), "", True) for name in ("solver", "judge")]
    known = policies.known_versions([episode])
    assert known == {"rollout/solver/version_known": 1.0, "rollout/judge/version_known": 0.0}
    assert "judge" in exactness_breaches(known, max_staleness=1, stale_samples="drop")["version"]
