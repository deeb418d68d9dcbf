"""The collapse guard: entropy and response-length ratios to the first steps, one warning per metric."""

import logging

from agentrl.trainer.collapse import CollapseMonitor


def test_ratios_against_the_first_steps_and_one_warning_when_entropy_collapses(caplog):
    monitor = CollapseMonitor(warn_ratio=0.25, baseline_steps=2)
    with caplog.at_level(logging.WARNING, logger="agentrl.trainer.collapse"):
        first = monitor.observe({"train/entropy": 2.0, "rollout/response_tokens_mean": 10.0}, step=1)
        second = monitor.observe({"train/entropy": 1.0, "rollout/response_tokens_mean": 30.0}, step=2)
        healthy = monitor.observe({"train/entropy": 0.6, "rollout/response_tokens_mean": 20.0}, step=3)
        assert not caplog.records
        collapsed = monitor.observe({"train/entropy": 0.3, "rollout/response_tokens_mean": 20.0}, step=4)
        again = monitor.observe({"train/entropy": 0.1, "rollout/response_tokens_mean": 20.0}, step=5)
    assert first["train/entropy_ratio"] == 1.0 and second["train/entropy_ratio"] == 1.0 / 1.5
    assert healthy["train/entropy_ratio"] == 0.6 / 1.5 and healthy["rollout/length_ratio"] == 1.0
    assert abs(collapsed["train/entropy_ratio"] - 0.2) < 1e-9 and collapsed["train/collapse_warnings"] == 1.0
    assert again["train/collapse_warnings"] == 1.0
    (record,) = caplog.records
    assert "step 4" in record.getMessage() and "entropy fell to 0.3" in record.getMessage()
    assert "trainer.lr" in record.getMessage() and "reward went" not in record.getMessage()  # none was logged


def test_a_collapsing_response_length_warns_and_zero_disables_warnings(caplog):
    with caplog.at_level(logging.WARNING, logger="agentrl.trainer.collapse"):
        monitor = CollapseMonitor(warn_ratio=0.5, baseline_steps=1)
        monitor.observe({"rollout/response_tokens_mean": 40.0}, step=1)
        assert monitor.observe({"rollout/response_tokens_mean": 8.0}, step=2)["train/collapse_warnings"] == 1.0
        assert "response length" in caplog.records[0].getMessage()
        silent = CollapseMonitor(warn_ratio=0.0, baseline_steps=1)
        silent.observe({"train/entropy": 1.0}, step=1)
        assert silent.observe({"train/entropy": 0.01}, step=2)["train/entropy_ratio"] == 0.01
    assert len(caplog.records) == 1


def test_steps_without_the_metrics_are_skipped():
    monitor = CollapseMonitor()
    assert monitor.observe({"train/skipped": 1.0}, step=1) == {"train/collapse_warnings": 0.0}
    assert monitor.observe({"train/entropy": 0.0}, step=2) == {"train/collapse_warnings": 0.0}


def test_with_an_entropy_bonus_a_rising_entropy_warns_once(caplog):
    with caplog.at_level(logging.WARNING, logger="agentrl.trainer.collapse"):
        plain = CollapseMonitor(baseline_steps=1)
        plain.observe({"train/entropy": 3.4}, step=1)
        assert plain.observe({"train/entropy": 8.2}, step=2)["train/collapse_warnings"] == 0.0
        assert not caplog.records  # no bonus: a rise is not watched
        bonus = CollapseMonitor(baseline_steps=1, rise_ratio=1.5)
        bonus.observe({"train/entropy": 3.4}, step=1)
        assert bonus.observe({"train/entropy": 5.0}, step=2)["train/collapse_warnings"] == 0.0
        assert bonus.observe({"train/entropy": 6.0}, step=3)["train/collapse_warnings"] == 1.0
        assert bonus.observe({"train/entropy": 8.2}, step=4)["train/collapse_warnings"] == 1.0
        silent = CollapseMonitor(warn_ratio=0.0, baseline_steps=1, rise_ratio=1.5)
        silent.observe({"train/entropy": 3.4}, step=1)
        assert silent.observe({"train/entropy": 8.2}, step=2)["train/collapse_warnings"] == 0.0
    (record,) = caplog.records
    assert "step 3" in record.getMessage() and "trainer.entropy_coef" in record.getMessage()


def test_the_warning_quotes_the_reward_from_its_start_so_convergence_reads_as_such(caplog):
    monitor = CollapseMonitor(warn_ratio=0.25, baseline_steps=2)
    with caplog.at_level(logging.WARNING, logger="agentrl.trainer.collapse"):
        monitor.observe({"train/entropy": 4.0, "rollout/reward_mean": 0.1}, step=1)
        monitor.observe({"train/entropy": 4.0, "rollout/reward_mean": 0.3}, step=2)
        monitor.observe({"train/entropy": 0.5, "rollout/reward_mean": 0.95}, step=3)
    (record,) = caplog.records
    assert "reward went from 0.2 to 0.95" in record.getMessage() and "converged" in record.getMessage()
