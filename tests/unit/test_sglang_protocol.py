"""SGLang `/generate`, weight updates (from disk and over NCCL), pause/continue, abort and the served version,
against payloads in SGLang's format (routes and bodies of SGLang 0.5.23's http_server.py and io_struct.py).

The recorded responses follow SGLang's tokenizer manager: `output_ids`, and `meta_info` with a
`finish_reason` object and `output_token_logprobs` as `[logprob, token_id, text|null]` triples.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch
from safetensors.torch import save_file

from agentrl.rollout.errors import ProtocolError
from agentrl.rollout.protocol import SamplingParams
from agentrl.rollout.servers import sglang
from agentrl.rollout.servers.sglang import (
    SGLangConfig,
    SGLangServer,
    attention_backend_for,
    build_command,
    distributed_update_request,
    init_group_request,
    served_weight_version,
    weight_update_request,
)
from agentrl.rollout.sglang_generate import generate_request, parse_finish_reason, parse_generate_response

# Greedy "The capital of France is Paris.<|im_end|>" tail: stopped on the EOS token id 2.
STOPPED_ON_EOS: dict[str, Any] = {
    "text": " Paris.",
    "output_ids": [7042, 30, 2],
    "meta_info": {
        "id": "b4f1e2c35c0a4b7e9d6f1a2b3c4d5e6f",
        "finish_reason": {"type": "stop", "matched": 2},
        "prompt_tokens": 7,
        "weight_version": "default",
        "total_retractions": 0,
        "input_token_logprobs": [[None, 504, None]],
        "output_token_logprobs": [[-0.0123, 7042, None], [-0.4711, 30, None], [-0.0009, 2, None]],
        "completion_tokens": 3,
        "cached_tokens": 0,
        "e2e_latency": 0.0417,
    },
}
# Older SGLang: no `output_ids`, texts in the logprob triples, cut by max_new_tokens.
LENGTH_NO_OUTPUT_IDS: dict[str, Any] = {
    "text": "The sea",
    "meta_info": {
        "id": "0c9d",
        "finish_reason": {"type": "length", "length": 2},
        "prompt_tokens": 5,
        "output_token_logprobs": [[-1.25, 504, "The"], [-0.5, 3426, " sea"]],
        "completion_tokens": 2,
        "cached_tokens": 0,
    },
}
ABORTED: dict[str, Any] = {
    "text": "",
    "output_ids": [],
    "meta_info": {
        "id": "a1",
        "finish_reason": {"type": "abort", "message": "Abort before prefill"},
        "weight_version": "7",
        "output_token_logprobs": [],
        "completion_tokens": 0,
    },
}


def test_generate_request_carries_token_ids_sampling_and_logprobs():
    sampling = SamplingParams(
        temperature=0.7, top_p=0.9, top_k=20, max_tokens=32, stop=["\n\n"], stop_token_ids=[2], seed=11
    )
    assert generate_request([1, 2, 3], sampling) == {
        "input_ids": [1, 2, 3],
        "sampling_params": {
            "max_new_tokens": 32,
            "temperature": 0.7,
            "top_p": 0.9,
            "top_k": 20,
            "stop": ["\n\n"],
            "stop_token_ids": [2],
            "sampling_seed": 11,
        },
        "return_logprob": True,
        "logprob_start_len": -1,
        "stream": False,
    }


def test_generate_request_leaves_out_unset_options():
    body = generate_request([5], SamplingParams(temperature=0.0, max_tokens=4))
    assert body["sampling_params"] == {"max_new_tokens": 4, "temperature": 0.0, "top_p": 1.0, "top_k": -1}


def test_parse_response_with_output_ids():
    out = parse_generate_response(STOPPED_ON_EOS, "http://gpu:30000")
    assert out.token_ids == [7042, 30, 2]
    assert out.logprobs == [-0.0123, -0.4711, -0.0009]
    assert out.finish_reason == "stop"
    assert out.policy_version is None  # "default" is not a version of ours
    assert out.replica == "http://gpu:30000"


def test_parse_response_without_output_ids_reads_ids_from_logprobs():
    out = parse_generate_response(LENGTH_NO_OUTPUT_IDS)
    assert (out.token_ids, out.logprobs, out.finish_reason) == ([504, 3426], [-1.25, -0.5], "length")


def test_parse_aborted_response_and_numeric_weight_version():
    out = parse_generate_response(ABORTED)
    assert (out.token_ids, out.logprobs, out.finish_reason, out.policy_version) == ([], [], "abort", 7)


def test_parse_batch_of_one():
    assert parse_generate_response([STOPPED_ON_EOS]).token_ids == [7042, 30, 2]


@pytest.mark.parametrize(
    ("payload", "match"),
    [
        ({"text": "x"}, "without meta_info"),
        ({"text": "x", "meta_info": {"finish_reason": None}}, "no output_token_logprobs"),
        ({**STOPPED_ON_EOS, "output_ids": [7042, 30]}, "differ"),
        ([STOPPED_ON_EOS, STOPPED_ON_EOS], "2 completions"),
    ],
)
def test_malformed_responses_raise_protocol_error(payload: Any, match: str):
    with pytest.raises(ProtocolError, match=match):
        parse_generate_response(payload)


def test_finish_reason_forms():
    assert parse_finish_reason(None) is None
    assert parse_finish_reason({"type": "stop", "matched": "\n\n"}) == "stop"
    assert parse_finish_reason("length") == "length"


def test_weight_update_request_body():
    assert weight_update_request("/ckpt/step3", 3, True) == {
        "model_path": "/ckpt/step3",
        "weight_version": "3",
        "abort_all_requests": True,
    }


def test_build_command():
    cmd = build_command("/py", "/m", 30000, "0.0.0.0", SGLangConfig(context_length=512, extra_args=["--tp", "2"]))
    assert cmd == [
        "/py", "-m", "sglang.launch_server", "--model-path", "/m", "--host", "0.0.0.0", "--port", "30000",
        "--dtype", "auto", "--context-length", "512", "--tp", "2",
    ]  # fmt: skip


async def test_generate_adapter_posts_to_generate(monkeypatch: pytest.MonkeyPatch):
    seen: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/generate"
        seen.append(json.loads(request.content))
        return httpx.Response(200, json=STOPPED_ON_EOS)

    real = httpx.AsyncClient
    monkeypatch.setattr(sglang.httpx, "AsyncClient", lambda **kw: real(transport=httpx.MockTransport(handler), **kw))
    server = SGLangServer("http://sglang.test:30000")
    server.policy_version = 4  # the handle's record of its last push: never a reply's version
    out = await server.generate([1, 2], SamplingParams(temperature=0.0, max_tokens=3))
    assert seen[0]["input_ids"] == [1, 2] and seen[0]["return_logprob"] is True
    assert (out.token_ids, out.finish_reason, out.policy_version) == ([7042, 30, 2], "stop", None)  # "default"


class FakeSGLang:
    """SGLang's control routes over `httpx.MockTransport`: records every call, keeps the weight version."""

    def __init__(self, answers: dict[str, httpx.Response] | None = None, model_info_route: str = "/model_info"):
        self.calls: list[tuple[str, str, Any]] = []
        self.version = "default"
        self.answers = answers or {}
        self.model_info_route = model_info_route
        self.folder_files: list[str] = []

    def handler(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        body = json.loads(request.content) if request.content else None
        self.calls.append((request.method, path, body))
        if path in self.answers:
            return self.answers[path]
        if path == self.model_info_route:
            return httpx.Response(200, json={"model_path": "/m", "weight_version": self.version})
        if path.endswith("model_info"):
            return httpx.Response(404, json={"detail": "Not Found"})
        if path == "/update_weights_from_disk":
            self.folder_files = sorted(p.name for p in Path(body["model_path"]).iterdir())
        if body and body.get("weight_version") is not None:
            self.version = body["weight_version"]
        if path == "/abort_request":
            return httpx.Response(200)
        return httpx.Response(200, json={"success": True, "message": "ok"})

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        transport = httpx.MockTransport(self.handler)
        monkeypatch.setattr(sglang.httpx, "Client", lambda **kw: REAL_CLIENT(transport=transport, **kw))

        def post(url: str, json: Any, timeout: float, headers: Any = None) -> httpx.Response:  # ManagedServer.abort
            with REAL_CLIENT(transport=transport, timeout=timeout) as http:
                return http.post(url, json=json)

        monkeypatch.setattr(sglang.httpx, "post", post)

    def paths(self) -> list[str]:
        return [path for _, path, _ in self.calls]


URL = "http://sglang.test:30000"
REAL_CLIENT = httpx.Client


def test_update_weights_from_state_dict_sends_a_complete_model_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    (tmp_path / "config.json").write_text("{}")
    fake = FakeSGLang()
    fake.install(monkeypatch)
    server = SGLangServer(URL, model_path=str(tmp_path))
    server.update_weights({"w": torch.ones(2, 2)}, version=3, in_flight="abort")
    assert fake.paths() == ["/update_weights_from_disk", "/model_info"]  # the served version is read back
    assert fake.calls[0][2]["weight_version"] == "3" and fake.calls[0][2]["abort_all_requests"] is True
    assert fake.folder_files == ["config.json", "model.safetensors"]
    assert server.policy_version == 3


def test_update_weights_failure_raises_with_sglang_message(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    save_file({"w": torch.zeros(1)}, str(tmp_path / "model.safetensors"))
    answer = httpx.Response(400, json={"success": False, "message": "shape mismatch in layer 3"})
    FakeSGLang({"/update_weights_from_disk": answer}).install(monkeypatch)
    server = SGLangServer(URL)
    with pytest.raises(httpx.HTTPStatusError, match="shape mismatch in layer 3"):
        server.update_weights(tmp_path, version=1)
    assert server.policy_version == 0


def test_update_weights_raises_when_sglang_serves_another_version(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    save_file({"w": torch.zeros(1)}, str(tmp_path / "model.safetensors"))
    stale = httpx.Response(200, json={"weight_version": "1"})
    FakeSGLang({"/model_info": stale}).install(monkeypatch)
    server = SGLangServer(URL)
    with pytest.raises(httpx.HTTPError, match="serves version 1 after an update to 2"):
        server.update_weights(tmp_path, version=2)
    assert server.policy_version == 0


def test_abort_pause_and_continue_use_sglangs_routes(monkeypatch: pytest.MonkeyPatch):
    fake = FakeSGLang()
    fake.install(monkeypatch)
    server = SGLangServer(URL)
    assert server.abort() == 0  # SGLang answers an empty 200, without a count
    server.pause()
    server.pause("in_place")
    server.resume()
    assert fake.calls == [
        ("POST", "/abort_request", {"abort_all": True}),
        ("POST", "/pause_generation", {"mode": "retract"}),
        ("POST", "/pause_generation", {"mode": "in_place"}),
        ("POST", "/continue_generation", {}),
    ]


def test_served_version_reads_model_info_and_falls_back_to_the_old_route(monkeypatch: pytest.MonkeyPatch):
    fake = FakeSGLang()
    fake.install(monkeypatch)
    server = SGLangServer(URL)
    assert server.served_version() == 0  # "default": the weights SGLang started with
    fake.version = "12"
    assert server.served_version() == 12
    older = FakeSGLang(model_info_route="/get_model_info")
    older.version = "4"
    older.install(monkeypatch)
    assert server.served_version() == 4
    assert older.paths() == ["/model_info", "/get_model_info"]


def test_served_weight_version_forms():
    assert served_weight_version({"weight_version": "7"}) == 7
    assert served_weight_version({"weight_version": "default"}) == 0
    assert served_weight_version({"weight_version": "rl-step-a"}) is None
    assert served_weight_version({"model_path": "/m"}) is None  # an SGLang that does not report one


def test_nccl_request_bodies_name_sglangs_fields():
    assert init_group_request("10.0.0.1", 29600, 1, 3, "g", "nccl") == {
        "master_address": "10.0.0.1",
        "master_port": 29600,
        "rank_offset": 1,
        "world_size": 3,
        "group_name": "g",
        "backend": "nccl",
    }
    body = distributed_update_request(["a", "b"], ["bfloat16", "float32"], [(2, 3), [4]], 5, False, "g")
    assert body == {
        "names": ["a", "b"],
        "dtypes": ["bfloat16", "float32"],
        "shapes": [[2, 3], [4]],
        "group_name": "g",
        "flush_cache": True,
        "abort_all_requests": False,
        "weight_version": "5",
    }
    with pytest.raises(ValueError, match="one of each per tensor"):
        distributed_update_request(["a"], ["bfloat16"], [], 1, False)


def test_nccl_handle_methods_post_the_bodies_and_check_the_version(monkeypatch: pytest.MonkeyPatch):
    fake = FakeSGLang()
    fake.install(monkeypatch)
    server = SGLangServer(URL)
    server.init_weights_update_group("10.0.0.1", 29600, rank_offset=2, world_size=4)
    server.update_weights_from_distributed(["w"], ["bfloat16"], [[2, 2]], version=6, in_flight="abort")
    assert fake.paths() == ["/init_weights_update_group", "/update_weights_from_distributed", "/model_info"]
    assert fake.calls[0][2]["rank_offset"] == 2 and fake.calls[0][2]["group_name"] == "agentrl_weights"
    update = fake.calls[1][2]
    assert (update["names"], update["weight_version"], update["abort_all_requests"]) == (["w"], "6", True)
    assert server.policy_version == 6


def test_a_refused_nccl_step_raises_with_sglangs_message(monkeypatch: pytest.MonkeyPatch):
    refused = httpx.Response(400, json={"success": False, "message": "Failed to initialize custom process group"})
    FakeSGLang({"/init_weights_update_group": refused}).install(monkeypatch)
    with pytest.raises(httpx.HTTPStatusError, match="init_weights_update_group failed.*custom process group"):
        SGLangServer(URL).init_weights_update_group("h", 1, 1, 2)
    FakeSGLang({"/pause_generation": httpx.Response(404, json={"detail": "Not Found"})}).install(monkeypatch)
    with pytest.raises(httpx.HTTPStatusError, match="upgrade SGLang"):
        SGLangServer(URL).pause()


def test_float32_asks_for_the_torch_native_attention_backend():
    assert attention_backend_for("float32") == attention_backend_for("float") == "torch_native"
    assert attention_backend_for("bfloat16") is None and attention_backend_for("auto") is None

    def flags(cfg: SGLangConfig) -> list[str]:
        return build_command("/py", "/m", 30000, "h", cfg)[9:]

    assert flags(SGLangConfig(dtype="float32")) == ["--dtype", "float32", "--attention-backend", "torch_native"]
    assert flags(SGLangConfig(dtype="bfloat16")) == ["--dtype", "bfloat16"]  # SGLang's own choice
    assert flags(SGLangConfig(dtype="bfloat16", attention_backend="triton"))[2:] == ["--attention-backend", "triton"]
    own = SGLangConfig(dtype="float32", extra_args=["--attention-backend", "triton"])
    assert flags(own) == ["--dtype", "float32", "--attention-backend", "triton"]  # the caller's flag wins
