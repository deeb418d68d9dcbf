"""SGLang `/generate` and `/update_weights_from_disk` translation, against payloads in SGLang's format.

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
    build_command,
    generate_request,
    parse_finish_reason,
    parse_generate_response,
    weight_update_request,
)

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
    server.policy_version = 4
    out = await server.generate([1, 2], SamplingParams(temperature=0.0, max_tokens=3))
    assert seen[0]["input_ids"] == [1, 2] and seen[0]["return_logprob"] is True
    assert (out.token_ids, out.finish_reason, out.policy_version) == ([7042, 30, 2], "stop", 4)


def _fake_post(monkeypatch: pytest.MonkeyPatch, answer: httpx.Response, calls: list[dict[str, Any]]) -> None:
    def post(url: str, json: dict[str, Any], timeout: float) -> httpx.Response:
        folder = Path(json["model_path"])
        calls.append({"url": url, "body": json, "files": sorted(p.name for p in folder.iterdir())})
        answer.request = httpx.Request("POST", url)
        return answer

    monkeypatch.setattr(sglang.httpx, "post", post)


def test_update_weights_from_state_dict_sends_a_complete_model_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    torch = pytest.importorskip("torch")
    (tmp_path / "config.json").write_text("{}")
    calls: list[dict[str, Any]] = []
    _fake_post(monkeypatch, httpx.Response(200, json={"success": True, "message": "ok"}), calls)
    server = SGLangServer("http://sglang.test:30000", model_path=str(tmp_path))
    server.update_weights({"w": torch.ones(2, 2)}, version=3, in_flight="abort")
    assert calls[0]["url"] == "http://sglang.test:30000/update_weights_from_disk"
    assert calls[0]["body"]["weight_version"] == "3" and calls[0]["body"]["abort_all_requests"] is True
    assert calls[0]["files"] == ["config.json", "model.safetensors"]
    assert server.policy_version == 3


def test_update_weights_failure_raises_with_sglang_message(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    save_file({"w": torch.zeros(1)}, str(tmp_path / "model.safetensors"))
    answer = httpx.Response(400, json={"success": False, "message": "shape mismatch in layer 3"})
    _fake_post(monkeypatch, answer, [])
    server = SGLangServer("http://sglang.test:30000")
    with pytest.raises(httpx.HTTPStatusError, match="shape mismatch in layer 3"):
        server.update_weights(tmp_path, version=1)
    assert server.policy_version == 0
