"""The vLLM NCCL route without vLLM or a GPU: the launch flags, the state dict as vLLM's `WeightSource`, the
fan-out client, the errors that say what to install, and the order of a push (vLLM's engine stood in for by a
fake with the same names, as vLLM 0.32 spells them)."""

from __future__ import annotations

import json
import sys
import threading
import types
from typing import Any

import httpx
import pytest

from agentrl.rollout.servers import nccl, vllm, vllm_nccl
from agentrl.rollout.servers.nccl import NcclUnavailableError
from agentrl.rollout.servers.vllm import VLLMConfig, VLLMServer, build_command, weight_transfer_args
from agentrl.rollout.servers.vllm_nccl import FanOutClient, StateDictSource, VLLMNcclSender, dtype_name

torch = pytest.importorskip("torch")


def test_nccl_servers_get_vllms_weight_transfer_flag():
    assert weight_transfer_args() == ["--weight-transfer-config", '{"backend":"nccl"}']
    assert json.loads(weight_transfer_args()[1]) == {"backend": "nccl"}
    nccl_cmd = build_command("py", "m", 1, "h", VLLMConfig(weight_transfer="nccl", extra_args=["--seed", "1"]))
    assert nccl_cmd[-4:] == ["--weight-transfer-config", '{"backend":"nccl"}', "--seed", "1"]
    assert "--weight-transfer-config" not in build_command("py", "m", 1, "h", VLLMConfig())


def test_state_dict_source_metadata_matches_iteration_and_vllms_dtype_names():
    state = {
        "model.embed_tokens.weight": torch.zeros(6, 4, dtype=torch.bfloat16),
        "model.norm.weight": torch.ones(4),
        "model.pos": torch.arange(3),
    }
    source = StateDictSource(state)
    meta = source.metadata()
    assert [(m.name, m.dtype, m.shape) for m in meta] == [
        ("model.embed_tokens.weight", torch.bfloat16, (6, 4)),
        ("model.norm.weight", torch.float32, (4,)),
        ("model.pos", torch.int64, (3,)),
        ("lm_head.weight", torch.bfloat16, (6, 4)),  # the tied head vLLM updates only by this name
    ]
    for _ in range(2):  # vLLM iterates it again on every update
        pairs = list(source)
        assert [(n, t.dtype, tuple(t.shape)) for n, t in pairs] == [(m.name, m.dtype, m.shape) for m in meta]
    info = source.update_info()
    assert info["dtype_names"] == ["bfloat16", "float32", "int64", "bfloat16"]
    assert [getattr(torch, name) for name in info["dtype_names"]] == [m.dtype for m in meta]  # how vLLM reads them
    assert info["shapes"] == [[6, 4], [4], [3], [6, 4]] and info["names"][-1] == "lm_head.weight"
    assert dtype_name(torch.float16) == "float16"


def test_state_dict_source_casts_floating_tensors_only_and_keeps_an_untied_head():
    state = {"w": torch.ones(2, 2), "ids": torch.arange(2), "lm_head.weight": torch.zeros(3, 2)}
    source = StateDictSource(state, dtype=torch.bfloat16)
    assert [m.dtype for m in source.metadata()] == [torch.bfloat16, torch.int64, torch.bfloat16]
    sent = dict(source)
    assert sent["w"].dtype == torch.bfloat16 and sent["ids"].dtype == torch.int64
    assert torch.equal(sent["lm_head.weight"], torch.zeros(3, 2, dtype=torch.bfloat16))
    assert sent["w"].is_contiguous()


class FakeSyncClient:
    """vLLM's `HTTPVLLMWeightSyncClient` surface, recording calls; `update_weights` waits at a barrier."""

    def __init__(self, barrier: threading.Barrier | None = None, served: dict[str, str] | None = None):
        self.calls: list[tuple[str, Any]] = []
        self.barrier = barrier
        self.served = served

    def init_weight_transfer_engine(self, init_info: dict[str, Any]) -> None:
        self.calls.append(("init", init_info))

    def start_weight_update(self) -> None:
        self.calls.append(("start", None))

    def update_weights(self, update_info: Any) -> None:
        if self.barrier is not None:
            self.barrier.wait(timeout=5)  # every server is in the update at once, or this times out
        self.calls.append(("update", update_info))

    def finish_weight_update(self, weight_version: str | None = None) -> None:
        self.calls.append(("finish", weight_version))
        if self.served is not None and weight_version is not None:
            self.served["version"] = weight_version

    def shutdown_weight_transfer_engine(self) -> None:
        self.calls.append(("shutdown", None))


def test_fan_out_client_gives_each_server_its_rank_and_calls_them_at_once():
    barrier = threading.Barrier(2)
    clients = [FakeSyncClient(barrier), FakeSyncClient(barrier)]
    fan = FanOutClient(clients, [1, 3])
    fan.init_weight_transfer_engine({"master_address": "h", "master_port": 1, "rank_offset": 1, "world_size": 5})
    fan.start_weight_update()
    fan.update_weights({"names": ["w"]})
    fan.weight_version = "9"
    fan.finish_weight_update()
    fan.finish_weight_update("10")
    assert [info["rank_offset"] for _, info in (c.calls[0] for c in clients)] == [1, 3]
    assert clients[1].calls[0][1]["world_size"] == 5
    assert [name for name, _ in clients[0].calls] == ["init", "start", "update", "finish", "finish"]
    assert [c.calls[-2:] for c in clients] == [[("finish", "9"), ("finish", "10")]] * 2
    with pytest.raises(ValueError, match="2 clients but 1 rank offsets"):
        FanOutClient(clients, [1])


def test_without_vllm_or_a_gpu_the_sender_says_what_to_install(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(nccl.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(NcclUnavailableError, match=r"needs the vllm package.*pip install 'agentrl\[vllm\]'"):
        VLLMNcclSender([])
    monkeypatch.setattr(nccl.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(NcclUnavailableError, match=r"needs a CUDA GPU.*weight_transfer='reload'"):
        VLLMNcclSender([])


class FakeEngine:
    """vLLM's `NCCLTrainerWeightTransferEngine`: what `trainer_init` and `send_weights` do with client and source."""

    made: list[FakeEngine] = []

    def __init__(self, info: Any, client: Any, source: Any):
        self.info, self.client, self.source = info, client, source
        self.sent: list[list[tuple[str, tuple[int, ...]]]] = []
        FakeEngine.made.append(self)

    @classmethod
    def trainer_init(cls, init_info: Any, *, client: Any, source: Any) -> FakeEngine:
        client.init_weight_transfer_engine({"master_address": init_info.master_address, "rank_offset": 1})
        return cls(init_info, client, source)

    def send_weights(self) -> None:
        self.client.start_weight_update()
        self.client.update_weights({"names": [m.name for m in self.source.metadata()]})
        self.sent.append([(name, tuple(t.shape)) for name, t in self.source])
        self.client.finish_weight_update()

    def shutdown(self) -> None:
        pass


def _fake_vllm(monkeypatch: pytest.MonkeyPatch, served: dict[str, str]) -> list[FakeSyncClient]:
    """Install a `vllm` package with the weight-transfer names the sender imports."""
    clients: list[FakeSyncClient] = []

    def http_client(base_url: str, timeout: float) -> FakeSyncClient:
        clients.append(FakeSyncClient(served=served))
        return clients[-1]

    class InitInfo(types.SimpleNamespace):
        pass

    class WeightSource:
        pass

    modules = {
        "vllm": {},
        "vllm.distributed": {},
        "vllm.distributed.weight_transfer": {},
        "vllm.distributed.weight_transfer.clients": {"HTTPVLLMWeightSyncClient": http_client},
        "vllm.distributed.weight_transfer.nccl_engine": {
            "NCCLTrainerInitInfo": InitInfo,
            "NCCLTrainerWeightTransferEngine": FakeEngine,
        },
        "vllm.distributed.weight_transfer.base": {
            "ParamMeta": lambda name, dtype, shape: types.SimpleNamespace(name=name, dtype=dtype, shape=shape),
            "WeightSource": WeightSource,
        },
    }
    for name, attrs in modules.items():
        module = types.ModuleType(name)
        module.__dict__.update(attrs)
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(vllm_nccl, "require_package", lambda *args: None)
    monkeypatch.setattr(vllm_nccl, "require_cuda", lambda *args: None)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(vllm_nccl.StateDictSource, "__iter__", _iter_on_cpu)
    return clients


def _iter_on_cpu(self: StateDictSource) -> Any:
    return ((name, t) for name, t in self._state.items())


def _mock_vllm_http(monkeypatch: pytest.MonkeyPatch, served: dict[str, str], calls: list[str]) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        query = f"?{request.url.query.decode()}" if request.url.query else ""
        calls.append(f"{request.url.host}{request.url.path}{query}")
        if request.url.path == "/weight_info":
            return httpx.Response(200, json={"weight_version": served["version"]})
        return httpx.Response(200, json={})

    real = httpx.Client
    monkeypatch.setattr(vllm.httpx, "Client", lambda **kw: real(transport=httpx.MockTransport(handler), **kw))


def test_push_pauses_sends_through_vllms_engine_resets_the_cache_resumes_and_checks_the_version(
    monkeypatch: pytest.MonkeyPatch,
):
    served = {"version": "0"}
    clients = _fake_vllm(monkeypatch, served)
    calls: list[str] = []
    _mock_vllm_http(monkeypatch, served, calls)
    servers = [VLLMServer("http://a:8000"), VLLMServer("http://b:8000")]
    sender = VLLMNcclSender(servers, workers_per_server=[1, 2], packed=False)
    with pytest.raises(RuntimeError, match=r"call init\(master_address, master_port\) first"):
        sender.push({"w": torch.zeros(1)}, version=1)
    sender.init("10.0.0.1", 29600)
    engine = FakeEngine.made[-1]
    assert (engine.info.world_size, engine.info.rank, engine.info.packed) == (4, 0, False)
    assert [c.calls[0][1]["rank_offset"] for c in clients] == [1, 2]

    sender.push({"model.embed_tokens.weight": torch.zeros(6, 4)}, version=3, in_flight="abort")
    assert engine.sent == [[("model.embed_tokens.weight", (6, 4)), ("lm_head.weight", (6, 4))]]
    assert [c.calls[-1] for c in clients] == [("finish", "3")] * 2
    assert calls == [
        "a/pause?mode=abort",
        "b/pause?mode=abort",
        "a/reset_prefix_cache",
        "b/reset_prefix_cache",
        "a/resume",
        "b/resume",
        "a/weight_info",
        "b/weight_info",
    ]
    assert [s.policy_version for s in servers] == [3, 3]

    engine.client.weight_version = None
    monkeypatch.setattr(FakeSyncClient, "finish_weight_update", lambda self, weight_version=None: None)
    with pytest.raises(httpx.HTTPError, match="serves version 3 after an update to 4"):
        sender.push({"w": torch.zeros(1)}, version=4)
    assert calls[-3:] == ["a/resume", "b/resume", "a/weight_info"]  # resumed before the check
