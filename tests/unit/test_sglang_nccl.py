"""The SGLang NCCL sender: rank layout, tensor specs, the no-GPU error, the order of HTTP calls against the
trainer's own part (with the NCCL parts stubbed), and the trainer's group itself over gloo on CPU, with a second
process joining the way an SGLang server does."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from agentrl.rollout.servers import sglang_nccl
from agentrl.rollout.servers.nccl import NcclUnavailableError, rank_layout
from agentrl.rollout.servers.process import free_port
from agentrl.rollout.servers.sglang_nccl import (
    SGLangNcclSender,
    broadcast_all,
    open_trainer_group,
    tensor_specs,
)

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]


def test_rank_layout_puts_the_trainer_first_and_servers_after_it():
    assert rank_layout(1, 1) == (2, [1])
    assert rank_layout([2, 1, 4], 3) == (8, [1, 3, 4])
    assert rank_layout(2, 2) == (5, [1, 3])
    with pytest.raises(ValueError, match="names 2 servers, but there are 3"):
        rank_layout([1, 1], 3)
    with pytest.raises(ValueError, match="at least one worker"):
        rank_layout([1, 0], 2)


def test_tensor_specs_name_dtypes_as_sglang_reads_them():
    state = {"a": torch.zeros(2, 3, dtype=torch.bfloat16), "b": torch.zeros(4), "c": torch.zeros(1, dtype=torch.int64)}
    names, dtypes, shapes = tensor_specs(state)
    assert (names, dtypes, shapes) == (["a", "b", "c"], ["bfloat16", "float32", "int64"], [[2, 3], [4], [1]])
    assert [getattr(torch, d) for d in dtypes] == [t.dtype for t in state.values()]  # SGLang's getattr(torch, dtype)


def test_without_a_gpu_the_sender_says_what_to_use_instead(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(NcclUnavailableError, match=r"needs a CUDA GPU.*SGLangServer\.update_weights"):
        SGLangNcclSender([])


class FakeServer:
    """An SGLang handle whose NCCL calls block until the trainer has done its part, as the real ones do."""

    def __init__(self, url: str, trainer_done: threading.Event, refuse: bool = False):
        self.base_url = url
        self.trainer_done = trainer_done
        self.refuse = refuse
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def init_weights_update_group(self, *args: Any) -> None:
        self.calls.append(("init", args))
        assert self.trainer_done.wait(5), "the server call ended before the trainer opened its side"

    def update_weights_from_distributed(self, *args: Any) -> None:
        if self.refuse:
            raise RuntimeError("SGLang update_weights_from_distributed failed (HTTP 400)")
        self.calls.append(("update", args))
        assert self.trainer_done.wait(5), "the server call ended before the trainer broadcast"


def _stub_nccl(monkeypatch: pytest.MonkeyPatch, done: threading.Event, seen: dict[str, Any]) -> None:
    monkeypatch.setattr(sglang_nccl, "require_cuda", lambda what, instead: None)

    def open_group(*args: Any) -> str:
        seen["group"] = args
        done.set()
        return "group"

    def broadcast(tensors: list[Any], group: str) -> None:
        seen["broadcast"] = ([tuple(t.shape) for t in tensors], group)
        done.set()

    monkeypatch.setattr(sglang_nccl, "open_trainer_group", open_group)
    monkeypatch.setattr(sglang_nccl, "broadcast_all", broadcast)
    monkeypatch.setattr(sglang_nccl, "_on_gpu", dict)


def test_init_joins_every_server_at_its_rank_while_the_trainer_opens_rank_0(monkeypatch: pytest.MonkeyPatch):
    done, seen = threading.Event(), {}
    _stub_nccl(monkeypatch, done, seen)
    servers = [FakeServer("http://a", done), FakeServer("http://b", done)]
    sender = SGLangNcclSender(servers, workers_per_server=[2, 1])  # type: ignore[arg-type]
    sender.init("10.0.0.1", 29600, timeout=30)
    assert seen["group"] == ("10.0.0.1", 29600, 4, "agentrl_weights", "nccl", 30)
    assert servers[0].calls == [("init", ("10.0.0.1", 29600, 1, 4, "agentrl_weights", "nccl", 30))]
    assert servers[1].calls == [("init", ("10.0.0.1", 29600, 3, 4, "agentrl_weights", "nccl", 30))]


def test_push_posts_the_specs_to_every_server_while_broadcasting_in_the_same_order(monkeypatch: pytest.MonkeyPatch):
    done, seen = threading.Event(), {}
    _stub_nccl(monkeypatch, done, seen)
    servers = [FakeServer("http://a", done), FakeServer("http://b", done)]
    sender = SGLangNcclSender(servers)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match=r"call init\(master_address, master_port\) first"):
        sender.push({"w": torch.zeros(1)}, version=1)
    sender.init("h", 1)
    done.clear()
    state = {"embed": torch.zeros(6, 4, dtype=torch.bfloat16), "norm": torch.ones(4)}
    sender.push(state, version=7, in_flight="abort", timeout=30)
    specs = (["embed", "norm"], ["bfloat16", "float32"], [[6, 4], [4]])
    for server in servers:
        assert server.calls[-1] == ("update", (*specs, 7, "abort", "agentrl_weights", 30))
    assert seen["broadcast"] == ([(6, 4), (4,)], "group")


def test_a_refused_update_is_raised_before_the_trainer_waits_in_nccl(monkeypatch: pytest.MonkeyPatch):
    done, seen = threading.Event(), {}
    _stub_nccl(monkeypatch, done, seen)
    sender = SGLangNcclSender([FakeServer("http://a", done, refuse=True)])  # type: ignore[list-item]
    sender.init("h", 1)

    def late_broadcast(tensors: list[Any], group: str) -> None:
        seen["broadcast"] = True

    monkeypatch.setattr(sglang_nccl, "broadcast_all", late_broadcast)
    monkeypatch.setattr(sglang_nccl.ThreadPoolExecutor, "submit", _run_now)
    with pytest.raises(RuntimeError, match="HTTP 400"):
        sender.push({"w": torch.zeros(1)}, version=1)
    assert "broadcast" not in seen


def _run_now(pool: Any, fn: Any, *args: Any) -> Any:
    """`ThreadPoolExecutor.submit` that runs the call before returning (a request refused at once)."""
    from concurrent.futures import Future

    future: Future[Any] = Future()
    try:
        future.set_result(fn(*args))
    except Exception as e:
        future.set_exception(e)
    return future


SERVER_SIDE = """
import sys, torch
from agentrl.rollout.servers.sglang_nccl import broadcast_all, open_trainer_group
group = open_trainer_group("127.0.0.1", int(sys.argv[1]), 2, "agentrl_weights", backend="gloo", timeout_s=60, rank=1)
received = [torch.empty(2, 3), torch.empty(4, dtype=torch.bfloat16)]
broadcast_all(received, group)
print([t.tolist() for t in received])
"""


def test_the_trainer_group_broadcasts_to_a_rank_that_joins_like_an_sglang_server():
    # gloo stands in for NCCL: the rendezvous, the group-name store prefix and the ranks are the same.
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER_SIDE, str(port)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        group = open_trainer_group("127.0.0.1", port, 2, "agentrl_weights", backend="gloo", timeout_s=60)
        broadcast_all([torch.arange(6.0).reshape(2, 3), torch.full((4,), 0.5, dtype=torch.bfloat16)], group)
        out, _ = server.communicate(timeout=60)
        torch.distributed.destroy_process_group(group)
    finally:
        server.kill()
    assert out.strip() == str([[[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]], [0.5, 0.5, 0.5, 0.5]])
