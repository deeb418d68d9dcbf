"""Training against a built-in server that shares no filesystem with the trainer: the `hf` server runs in its own
Docker container (its own `/dev/shm`), reached only by URL, so every weight push is uploaded over HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from agentrl.cli import main
from agentrl.rollout.handles import HFServer
from agentrl.sandbox.containers import owner_labels
from benchmarks.servers import hf_server_in_docker

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def hf_server_in_a_container(docker_client, sandbox_base_image, default_model_path) -> Iterator[HFServer]:
    """The `hf` server in a container of the sandbox image, on this checkout's venv and model, mounted read-only;
    it listens beyond its container, so it takes weights with its token (the handle's)."""
    with hf_server_in_docker(default_model_path, 2048, labels=owner_labels("test-remote-hf")) as handle:
        yield handle


def test_the_handle_sees_that_the_container_does_not_share_our_files(
    hf_server_in_a_container, hf_server_url, tmp_path, monkeypatch
):
    remote = hf_server_in_a_container
    assert HFServer(remote.url, token=remote.token)._reads_our_files(tmp_path, 30) is False
    assert HFServer(hf_server_url)._reads_our_files(tmp_path, 30) is True  # a server on this machine does
    monkeypatch.delenv("AGENTRL_WEIGHTS_TOKEN", raising=False)
    with pytest.raises(httpx.HTTPStatusError, match="401"):  # its weight routes refuse a caller without the token
        HFServer(remote.url)._reads_our_files(tmp_path, 30)


def test_two_training_steps_against_a_server_in_another_container(
    hf_server_in_a_container, tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv("AGENTRL_WEIGHTS_TOKEN", hf_server_in_a_container.token)  # what the trainer sends
    url = hf_server_in_a_container.url
    args = [
        "train",
        "recipe=quickstart",
        f"rollout.urls=[{url}]",
        "trainer.steps=2",
        "data.batch_size=2",
        "rollout.n=4",
        "rollout.max_tokens=24",
        "rollout.seed=7",
        "data.eval_files=[]",
        "trainer.skip_zero_advantage=false",
        f"output_dir={tmp_path}",
    ]
    assert main(args) == 0, capsys.readouterr().err[-3000:]
    steps = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == [1, 2]
    assert steps[0]["train/grad_norm"] > 0  # step 1 changed the weights
    # step 2 was sampled by the uploaded weights of step 1: the server's logprobs are the trainer's
    assert steps[1]["train/rollout_logprob_abs_diff"] < 1e-3
    served = httpx.get(f"{url}/v1/weights/version", timeout=30).json()["policy_version"]
    assert served == 2
