"""The weight-route check at start: a server that cannot take the trainer's weights stops the run before step 1
with what to do, instead of a 404 or an unreadable path at the first push. Fake handles and HTTP answers."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from agentrl.config.loader import load_config
from agentrl.rollout import routes
from agentrl.rollout.routes import NoWeightRouteError, check_weight_routes, is_this_machine
from agentrl.trainer.preflight import run_problems

VLLM_ROUTES = ["/v1/completions", "/collective_rpc", "/pause", "/resume", "/update_weight_version", "/weight_info"]


class Handle:
    def __init__(self, url: str, backend: str, weights_via: str = "file", version: Any = 0) -> None:
        self.url, self.backend, self.weights_via, self.version = url, backend, weights_via, version

    def served_version(self) -> int:
        if isinstance(self.version, Exception):
            raise self.version
        return self.version


def serve_routes(monkeypatch: pytest.MonkeyPatch, paths: list[str]) -> None:
    def get(url: str, timeout: float) -> httpx.Response:
        assert url.endswith("/openapi.json")
        return httpx.Response(200, json={"paths": {p: {} for p in paths}}, request=httpx.Request("GET", url))

    monkeypatch.setattr(routes.httpx, "get", get)


def cfg(*overrides: str):
    return load_config(overrides=list(overrides))


def test_vllm_without_its_dev_routes_is_refused_with_how_to_start_it(monkeypatch):
    serve_routes(monkeypatch, ["/v1/completions"])
    with pytest.raises(NoWeightRouteError, match="VLLM_SERVER_DEV_MODE=1") as caught:
        check_weight_routes([Handle("http://127.0.0.1:8000", "vllm")], cfg())
    assert "/collective_rpc" in str(caught.value) and "/weight_info" in str(caught.value)


def test_vllm_on_another_host_needs_a_shared_folder_or_ray_placement(monkeypatch, tmp_path):
    serve_routes(monkeypatch, VLLM_ROUTES)
    remote = Handle("http://192.0.2.7:8000", "vllm")  # TEST-NET-1: never this machine
    with pytest.raises(NoWeightRouteError, match="runs on another host") as caught:
        check_weight_routes([remote], cfg())
    assert "rollout.shared_weights_dir" in str(caught.value) and "rollout.placement=ray" in str(caught.value)
    check_weight_routes([remote], cfg(f"rollout.shared_weights_dir={tmp_path}"))
    check_weight_routes([Handle("http://127.0.0.1:8000", "vllm")], cfg())


def test_sglang_needs_update_weights_from_disk(monkeypatch):
    serve_routes(monkeypatch, ["/generate"])
    with pytest.raises(NoWeightRouteError, match="/update_weights_from_disk"):
        check_weight_routes([Handle("http://localhost:30000", "sglang")], cfg())


def test_every_problem_is_listed_and_actors_and_hf_servers_pass(monkeypatch):
    serve_routes(monkeypatch, [])
    servers = [
        Handle("http://192.0.2.7:1", "vllm", weights_via="object_store"),  # an actor: weights by object store
        Handle("http://127.0.0.1:2", "hf"),
        Handle("http://127.0.0.1:3", "hf", version=httpx.ConnectError("refused")),
        Handle("http://127.0.0.1:4", "vllm"),
    ]
    with pytest.raises(NoWeightRouteError) as caught:
        check_weight_routes(servers, cfg())
    lines = str(caught.value).splitlines()[1:]
    assert len(lines) == 2
    assert "hf server at http://127.0.0.1:3" in lines[0] and "set rollout.backend" in lines[0]
    assert "vllm server at http://127.0.0.1:4" in lines[1]


def test_this_machine():
    assert is_this_machine("http://127.0.0.1:8000") and is_this_machine("http://localhost:1")
    assert not is_this_machine("http://192.0.2.7:8000")
    assert not is_this_machine("http://no-such-host.invalid:8000")


def test_config_refuses_ray_placement_with_urls_and_a_missing_shared_folder(tmp_path):
    problems = run_problems(cfg("rollout.placement=ray", "rollout.urls=[http://h:1]"))
    assert any("set only one of them" in p for p in problems)
    missing = tmp_path / "nope"
    problems = run_problems(cfg(f"rollout.shared_weights_dir={missing}"))
    assert any(f"rollout.shared_weights_dir: {missing} is not a folder" in p for p in problems)


def test_nccl_transfer_is_for_vllm_and_sglang_servers_only():
    problems = run_problems(cfg("rollout.weight_transfer=nccl"))  # the default backend is hf
    assert any("rollout.weight_transfer=nccl is for vLLM and SGLang" in p for p in problems)
    assert not any(
        "weight_transfer" in p for p in run_problems(cfg("rollout.weight_transfer=nccl", "rollout.backend=vllm"))
    )


def test_a_server_on_another_host_is_fine_with_nccl(monkeypatch):
    serve_routes(monkeypatch, VLLM_ROUTES)
    check_weight_routes([Handle("http://192.0.2.7:8000", "vllm")], cfg("rollout.weight_transfer=nccl"))
