"""The dtype the rollout servers that training starts run in (`rollout.dtype`)."""

import pytest

from agentrl.config import AgentRLConfig
from agentrl.rollout import handles
from agentrl.rollout.handles import launch_server, server_dtype


def config(**rollout_and_trainer) -> AgentRLConfig:
    cfg = AgentRLConfig()
    cfg.rollout.dtype = rollout_and_trainer.get("rollout", "auto")
    cfg.trainer.dtype = rollout_and_trainer.get("trainer", "auto")
    return cfg


def test_auto_is_bfloat16_with_a_gpu_and_float32_without():
    assert server_dtype(config(), has_gpu=True) == "bfloat16"
    assert server_dtype(config(), has_gpu=False) == "float32"


def test_auto_follows_the_trainer_dtype_and_an_explicit_rollout_dtype_wins():
    assert server_dtype(config(trainer="float32"), has_gpu=True) == "float32"
    assert server_dtype(config(trainer="bfloat16"), has_gpu=False) == "bfloat16"
    assert server_dtype(config(rollout="float32", trainer="bfloat16"), has_gpu=True) == "float32"


def test_a_bad_rollout_dtype_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="bfloat16"):
        AgentRLConfig.model_validate({"rollout": {"dtype": "fp8"}})


@pytest.mark.parametrize("backend", ["hf", "vllm", "sglang"])
def test_every_backend_is_launched_in_the_server_dtype(monkeypatch, backend):
    launched = {}

    def record(*args, **kwargs):
        launched.update(kwargs)
        raise RuntimeError("stop here")

    from agentrl.rollout.servers import hf, sglang, vllm

    monkeypatch.setattr(hf.launch, "launch_hf_server", record)
    monkeypatch.setattr(vllm.VLLMServer, "launch", record)
    monkeypatch.setattr(sglang.SGLangServer, "launch", record)
    monkeypatch.setattr(handles, "server_dtype", lambda cfg: "the server dtype")
    cfg = config()
    cfg.rollout.backend = backend
    with pytest.raises(RuntimeError, match="stop here"):
        launch_server(cfg, "/models/m")
    assert launched["dtype"] == "the server dtype"
