"""`init_ray`: start or join Ray, with a fake `ray` module (no cluster is started)."""

from __future__ import annotations

import logging
import sys
import types
from typing import Any

import pytest

from agentrl.config.schema import RayConfig
from agentrl.ray_cluster import RayClusterError, init_ray


def fake_ray(monkeypatch: pytest.MonkeyPatch, init) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []

    def record(**kwargs: Any) -> None:
        calls.append(kwargs)
        init(**kwargs)

    module = types.SimpleNamespace(is_initialized=lambda: False, init=record)
    monkeypatch.setitem(sys.modules, "ray", module)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    return calls


def test_a_local_ray_starts_with_the_configured_cpus(monkeypatch: pytest.MonkeyPatch):
    calls = fake_ray(monkeypatch, lambda **kw: None)
    assert init_ray(RayConfig(num_cpus=3)) is True
    assert calls[0]["address"] is None and calls[0]["num_cpus"] == 3


def test_joining_a_ray_already_running_here_is_said(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture):
    def init(**kwargs: Any) -> None:
        if "num_cpus" in kwargs:
            raise ValueError("When connecting to an existing cluster, num_cpus and num_gpus must not be provided.")

    calls = fake_ray(monkeypatch, init)
    with caplog.at_level(logging.WARNING, logger="agentrl.ray_cluster"):
        assert init_ray(RayConfig(num_cpus=3)) is True
    assert len(calls) == 2 and "num_cpus" not in calls[1]
    assert "joined the Ray cluster already running on this machine" in caplog.text and "ray stop" in caplog.text


def test_a_cluster_that_cannot_be_joined_says_what_to_check(monkeypatch: pytest.MonkeyPatch):
    def init(**kwargs: Any) -> None:
        raise ConnectionError("could not reach the GCS at 10.0.0.9:6379.")

    fake_ray(monkeypatch, init)
    with pytest.raises(RayClusterError, match=r"join the Ray cluster at ray.address='10.0.0.9:6379'.*ray status"):
        init_ray(RayConfig(address="10.0.0.9:6379"))
