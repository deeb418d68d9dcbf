"""vLLM launch command and environment, weight-update checks and call sequence, and the generic server
subprocess helper (with a tiny stdlib HTTP server standing in for an engine). No vLLM needed."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentrl.rollout.servers import vllm
from agentrl.rollout.servers.process import ServerProcess, ServerStartError, free_port
from agentrl.rollout.servers.vllm import (
    VLLMConfig,
    VLLMNotInstalledError,
    VLLMServer,
    build_command,
    build_env,
    vllm_python,
)
from agentrl.rollout.servers.vllm_weights import as_weights_folder, check_tensors, folder_tensors
from agentrl.weights_io import save_state_dict

torch = pytest.importorskip("torch")

HEALTH_SERVER = """
import http.server, subprocess, sys
child = subprocess.Popen(["sleep", "300"])
open(sys.argv[2], "w").write(str(child.pid))
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
    def log_message(self, *args):
        pass
print("engine ready", flush=True)
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def test_command_has_the_cpu_friendly_defaults():
    cmd = build_command("/venv/bin/python", "/models/m", 8011, "127.0.0.1", VLLMConfig(max_model_len=256))
    assert cmd[:3] == ["/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server"]
    flags = " ".join(cmd[3:])
    assert "--model /models/m --host 127.0.0.1 --port 8011 --dtype float32 --max-model-len 256" in flags
    assert cmd[-1] == "-O0"  # no torch.compile: minutes faster to start on CPU


def test_command_with_compile_and_extra_flags():
    cfg = VLLMConfig(compile=True, max_num_seqs=8, extra_args=["--served-model-name", "policy"])
    cmd = build_command("py", "m", 1, "h", cfg)
    assert "-O0" not in cmd
    assert cmd[-4:] == ["--max-num-seqs", "8", "--served-model-name", "policy"]


def test_env_enables_dev_endpoints_and_lets_the_caller_win(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "3")
    env = build_env(VLLMConfig(kv_cache_gib=1, env={"VLLM_CPU_OMP_THREADS_BIND": "0", "HF_HUB_OFFLINE": "0"}))
    assert env["VLLM_SERVER_DEV_MODE"] == "1"
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "3"  # the caller's environment wins over our default
    assert env["HF_HUB_OFFLINE"] == env["VLLM_CPU_OMP_THREADS_BIND"] == "0"  # and config.env wins over all


def test_vllm_python_missing_says_how_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("AGENTRL_VLLM_PYTHON", str(tmp_path / "nope" / "python"))
    with pytest.raises(VLLMNotInstalledError, match=r"scripts/install_vllm\.sh"):
        vllm_python()
    monkeypatch.setenv("AGENTRL_VLLM_PYTHON", sys.executable)
    assert vllm_python() == sys.executable


def test_launch_rejects_unknown_options():
    with pytest.raises(TypeError, match="unknown VLLMConfig field 'max_len'"):
        VLLMServer.launch("/nonexistent", max_len=5)


def test_save_state_dict_keeps_a_named_tied_alias_as_a_copy_and_reads_back_shapes(tmp_path: Path):
    embed = torch.zeros(6, 4)
    state = {"embed.weight": embed, "lm_head.weight": embed, "norm.weight": torch.ones(4)}
    save_state_dict(state, tmp_path / "a.safetensors", keep=["lm_head.weight"])
    assert folder_tensors(tmp_path) == {"embed.weight": [6, 4], "lm_head.weight": [6, 4], "norm.weight": [4]}


def test_a_tied_head_missing_from_the_weights_is_added_as_a_copy_of_the_embeddings(tmp_path: Path):
    # vLLM keeps its own copy of a tied head and updates it on reload only from lm_head.weight
    embed = torch.arange(24.0).reshape(6, 4)
    state = {"model.embed_tokens.weight": embed, "model.norm.weight": torch.ones(4)}
    (tmp_path / "dict").mkdir()
    as_weights_folder(state, tmp_path / "dict")
    names = {"model.embed_tokens.weight", "lm_head.weight", "model.norm.weight"}
    assert set(folder_tensors(tmp_path / "dict")) == names
    (tmp_path / "src").mkdir()
    save_state_dict(state, tmp_path / "src" / "model.safetensors")
    (tmp_path / "file").mkdir()
    folder = as_weights_folder(tmp_path / "src" / "model.safetensors", tmp_path / "file")
    from safetensors.torch import load_file

    head = {k: v for f in folder.glob("*.safetensors") for k, v in load_file(str(f)).items()}["lm_head.weight"]
    assert torch.equal(head, embed)
    untied = {**state, "lm_head.weight": torch.ones(6, 4)}
    (tmp_path / "untied").mkdir()
    as_weights_folder(untied, tmp_path / "untied")
    assert torch.equal(load_file(str(tmp_path / "untied" / "model.safetensors"))["lm_head.weight"], torch.ones(6, 4))


def test_weights_folder_from_a_file_or_a_folder(tmp_path: Path):
    (tmp_path / "src").mkdir()
    file = tmp_path / "src" / "step7.safetensors"
    save_state_dict({"w": torch.ones(2)}, file)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    assert as_weights_folder(file, scratch) == scratch and folder_tensors(scratch) == {"w": [2]}
    other = tmp_path / "other"
    other.mkdir()
    assert as_weights_folder(tmp_path / "src", other) == other and folder_tensors(other) == {"w": [2]}
    with pytest.raises(ValueError, match="neither a folder"):
        as_weights_folder(tmp_path / "missing.bin", scratch)
    with pytest.raises(ValueError, match="no .safetensors file"):
        folder_tensors(scratch / "..")


def test_check_tensors_lists_every_problem():
    expected = {"a": [2, 2], "b": [3], "c": [1]}
    check_tensors(expected, {"a": [2, 2], "b": [3], "c": [1]})
    with pytest.raises(ValueError, match=r"missing: \['c'\]; unexpected: \['z'\]; wrong shape: \['b'\]"):
        check_tensors(expected, {"a": [2, 2], "b": [4], "z": [1]})


def _mock_client(monkeypatch: pytest.MonkeyPatch, calls: list[tuple[str, Any]]) -> None:
    served = {"version": "0"}

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        if request.url.path == "/collective_rpc":
            assert os.path.isfile(Path(body["kwargs"]["weights_path"]) / "model.safetensors")
        calls.append((f"{request.url.path}{'?' + request.url.query.decode() if request.url.query else ''}", body))
        if request.url.path == "/update_weight_version":
            served["version"] = body["new_version"]
        if request.url.path == "/weight_info":
            return httpx.Response(200, json={"weight_version": served["version"]})
        return httpx.Response(200, json={"results": [None]})

    real = httpx.Client
    monkeypatch.setattr(vllm.httpx, "Client", lambda **kw: real(transport=httpx.MockTransport(handler), **kw))


def test_update_weights_pauses_reloads_resets_cache_and_resumes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    save_state_dict({"w": torch.zeros(2, 3)}, tmp_path / "model.safetensors")
    calls: list[tuple[str, Any]] = []
    _mock_client(monkeypatch, calls)
    server = VLLMServer("http://vllm.test:8000", model_path=str(tmp_path))
    server.update_weights({"w": torch.ones(2, 3)}, version=5, in_flight="abort")
    assert [path for path, _ in calls] == [
        "/pause?mode=abort",
        "/collective_rpc",
        "/reset_prefix_cache",
        "/update_weight_version",
        "/resume",
        "/weight_info",  # the served version is read back and checked
    ]
    assert calls[1][1]["method"] == "reload_weights"
    assert calls[3][1] == {"new_version": "5"}
    assert server.policy_version == 5 and server.served_version() == 5


def test_a_refused_pause_stops_the_update_before_any_weight_is_loaded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    save_state_dict({"w": torch.zeros(2, 3)}, tmp_path / "model.safetensors")
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        return httpx.Response(400, json={"error": "Invalid pause mode"})

    real = httpx.Client
    monkeypatch.setattr(vllm.httpx, "Client", lambda **kw: real(transport=httpx.MockTransport(handler), **kw))
    server = VLLMServer("http://vllm.test:8000", model_path=str(tmp_path))
    with pytest.raises(httpx.HTTPStatusError, match="vLLM pause failed"):
        server.update_weights({"w": torch.ones(2, 3)}, version=1, in_flight="abort")
    assert calls == ["/pause"] and server.policy_version == 0


def test_an_update_has_one_deadline_for_all_its_steps_and_resumes_the_server_past_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    save_state_dict({"w": torch.zeros(2, 3)}, tmp_path / "model.safetensors")
    calls: list[tuple[str, float]] = []

    def slow_handler(request: httpx.Request) -> httpx.Response:
        calls.append((request.url.path, request.extensions["timeout"]["read"]))
        time.sleep(0.2)  # each step takes 0.2 s: four of them overrun a 0.5 s deadline, none alone does
        return httpx.Response(200, json={"weight_version": "0"})

    real = httpx.Client
    monkeypatch.setattr(vllm.httpx, "Client", lambda **kw: real(transport=httpx.MockTransport(slow_handler), **kw))
    server = VLLMServer("http://vllm.test:8000", model_path=str(tmp_path))
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"deadline of 0.5 s \(before update_weight_version\)"):
        server.update_weights({"w": torch.ones(2, 3)}, version=1, timeout=0.5)
    assert time.monotonic() - started < 1.0
    paths = [path for path, _ in calls]
    assert paths == ["/pause", "/collective_rpc", "/reset_prefix_cache", "/resume"]
    step_timeouts = [seconds for _, seconds in calls[:3]]
    assert step_timeouts == sorted(step_timeouts, reverse=True) and step_timeouts[0] <= 0.5
    assert calls[-1][1] >= vllm.RESUME_GRACE_S  # the resume is tried even though no time is left
    assert server.policy_version == 0


def test_pause_resume_and_abort_use_vllms_routes(monkeypatch: pytest.MonkeyPatch):
    calls: list[tuple[str, Any]] = []
    _mock_client(monkeypatch, calls)
    monkeypatch.setattr(vllm.httpx, "post", lambda url, json, timeout, headers=None: _post_via(url, json, calls))
    server = VLLMServer("http://vllm.test:8000")
    server.pause("keep")
    server.resume()
    server.abort()
    assert [path for path, _ in calls] == ["/pause?mode=keep", "/resume", "/abort_requests"]


def _post_via(url: str, body: Any, calls: list[tuple[str, Any]]) -> httpx.Response:
    calls.append((httpx.URL(url).path, body))
    return httpx.Response(200, json={"aborted": 0}, request=httpx.Request("POST", url))


def test_mismatched_weights_never_reach_the_server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    save_state_dict({"w": torch.zeros(2, 3)}, tmp_path / "model.safetensors")
    calls: list[tuple[str, Any]] = []
    _mock_client(monkeypatch, calls)
    server = VLLMServer("http://vllm.test:8000", model_path=str(tmp_path))
    with pytest.raises(ValueError, match="wrong shape"):
        server.update_weights({"w": torch.ones(3, 2)}, version=1)
    assert calls == [] and server.policy_version == 0


def test_server_process_waits_for_health_and_stops_its_whole_group(tmp_path: Path):
    port, pid_file = free_port(), tmp_path / "child.pid"
    cmd = [sys.executable, "-c", HEALTH_SERVER, str(port), str(pid_file)]
    with ServerProcess(cmd, log_path=tmp_path / "server.log", name="fake-engine") as proc:
        proc.wait_healthy(f"http://127.0.0.1:{port}", timeout=30)
        assert proc.running
        child = int(pid_file.read_text())
    assert not proc.running
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "a child of the server outlived stop()"
    assert "engine ready" in proc.log_tail()


def test_server_that_dies_raises_with_its_log_tail(tmp_path: Path):
    cmd = [sys.executable, "-c", "import sys; print('CUDA out of memory: fake'); sys.exit(3)"]
    proc = ServerProcess(cmd, log_path=tmp_path / "server.log", name="fake-engine")
    proc.start()
    with pytest.raises(ServerStartError, match=r"(?s)exited with status 3.*CUDA out of memory: fake"):
        proc.wait_healthy(f"http://127.0.0.1:{free_port()}", timeout=30)


def test_server_that_never_answers_times_out_and_is_stopped():
    cmd = [sys.executable, "-c", "import time; print('still loading', flush=True); time.sleep(60)"]
    proc = ServerProcess(cmd, name="fake-engine")  # its own temporary log
    proc.start()
    with pytest.raises(ServerStartError, match=r"(?s)within 2 s.*still loading"):
        proc.wait_healthy(f"http://127.0.0.1:{free_port()}", timeout=2.0)
    assert not proc.running
    assert not proc.log_path.exists(), "stop() leaves no temporary log behind"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by init) counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False
