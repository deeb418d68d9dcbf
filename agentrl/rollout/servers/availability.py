"""Whether the rollout backend a run starts here is installed, asked before anything loads (`rollout.checks`)."""

from __future__ import annotations

import importlib.util
import os
import shutil

from agentrl.config.schema import RolloutConfig


def backend_problem(rollout: RolloutConfig) -> str | None:
    """What stops this machine from starting `rollout.backend`'s servers, with the command that fixes it; None when
    nothing does, or when the run starts none here (`rollout.urls`, or `placement=ray`: the nodes have their own)."""
    if rollout.urls or rollout.placement == "ray" or rollout.backend == "hf":
        return None
    if rollout.backend == "vllm":
        return _vllm_problem()
    return _sglang_problem()


def _vllm_problem() -> str | None:
    from agentrl.rollout.servers.vllm import VLLMNotInstalledError, vllm_python

    try:
        vllm_python()
    except VLLMNotInstalledError as exc:
        return f"rollout.backend=vllm: {exc}; or connect to a running vLLM with rollout.urls=[http://HOST:PORT]"
    return None


def _sglang_problem() -> str | None:
    python = os.environ.get("AGENTRL_SGLANG_PYTHON")
    if python and shutil.which(python):
        return None
    if importlib.util.find_spec("sglang") is not None:
        return None
    return (
        "rollout.backend=sglang: SGLang is not installed here (it needs a GPU): `pip install 'agentrl[sglang]'` on a "
        "GPU machine, set AGENTRL_SGLANG_PYTHON to a python that has it, or connect to a running SGLang with "
        "rollout.urls=[http://HOST:PORT]"
    )
