"""vLLM's generate route: the request body, answers in /v1/completions shape with each token's version, tokens split
by version into pieces, and the fall-back to /v1/completions when the route is off."""

from __future__ import annotations

import logging

import pytest

from agentrl.rollout.client import LLMClient, client_api
from agentrl.rollout.completions import TokenOutput
from agentrl.rollout.errors import ProtocolError
from agentrl.rollout.protocol import SamplingParams
from agentrl.rollout.testing import fake_servers
from agentrl.rollout.vllm_generate import as_completion, check_spans, generate_body, is_disabled, version_spans

ANSWER = {
    "choices": [
        {
            "index": 0,
            "token_ids": [5, 6, 7],
            "finish_reason": "length",
            "weight_versions": [{"version": "3", "start": 0, "end": 2}, {"version": "4", "start": 2, "end": 3}],
            "logprobs": {"content": [{"token_id": t, "logprob": -0.5 * t, "rank": 1} for t in (5, 6, 7)]},
        }
    ]
}


def test_body_asks_for_each_token_s_logprob_with_the_run_s_sampling():
    body = generate_body([1, 2], SamplingParams(temperature=0.7, top_k=5, max_tokens=9, seed=4, stop=["x"]))
    assert body["token_ids"] == [1, 2] and body["stream"] is False
    assert body["sampling_params"] == {
        "max_tokens": 9,
        "temperature": 0.7,
        "top_p": 1.0,
        "top_k": 5,
        "logprobs": 1,
        "stop": ["x"],
        "seed": 4,
    }


def test_answer_in_completions_shape_keeps_each_token_s_version():
    choice = as_completion(ANSWER, "u")["choices"][0]
    assert choice["token_ids"] == [5, 6, 7] and choice["logprobs"]["token_logprobs"] == [-2.5, -3.0, -3.5]
    assert choice["version_spans"] == [(0, 2, 3), (2, 3, 4)]
    assert version_spans([{"version": "default", "start": 0, "end": 4}]) == [(0, 4, None)]


def test_a_generation_across_an_update_becomes_one_piece_per_version():
    out = TokenOutput([5, 6, 7], [-1.0, -2.0, -3.0], "length", 4, version_spans=[(0, 2, 3), (2, 3, 4)])
    assert out.pieces() == [([5, 6], [-1.0, -2.0], 3), ([7], [-3.0], 4)]
    assert TokenOutput([5], [-1.0], "stop", 2).pieces() == [([5], [-1.0], 2)]
    assert TokenOutput([], [], "abort", 2).pieces() == [([], [], 2)]


async def test_a_vllm_without_the_route_is_reached_by_completions_with_unknown_versions(caplog):
    assert client_api("vllm") == "vllm_generate" and client_api("hf") == "completions"
    with fake_servers(1) as (server,):  # answers 404 on /inference/v1/generate, as vLLM without --enable-scale-out
        async with LLMClient(server.url, api="vllm_generate", max_retries=0) as llm:
            with caplog.at_level(logging.WARNING):
                out = await llm.generate([1, 2], SamplingParams(max_tokens=3))
            assert len(out.token_ids) == 3 and out.policy_version is None
            assert llm.api == "completions" and "--enable-scale-out" in caplog.text


def test_spans_must_cover_the_output_once_in_order():
    check_spans([(0, 2, 3), (2, 3, 4)], 3, "u")
    check_spans([], 0, "u")
    for bad in ([(0, 2, 3)], [(0, 2, 3), (1, 3, 4)], [(1, 3, 3)], [(0, 2, 3), (2, 4, 4)]):
        with pytest.raises(ProtocolError, match="weight-version spans"):
            check_spans(bad, 3, "u")


def test_only_a_missing_route_falls_back_not_a_missing_model():
    assert is_disabled(403, "Scale-out endpoints are disabled") and is_disabled(404, "Not Found")
    assert not is_disabled(404, "The model `policy` does not exist.") and not is_disabled(400, "bad")
