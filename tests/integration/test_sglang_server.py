"""A real SGLang server with the default model: token-in/token-out generation, logprobs, weight updates.

SGLang needs a CUDA GPU and is not installed by `make setup`. Where `nvidia-smi` lists no GPU, every test here is
skipped with that reason, with `CI=true` too (the CI runner of `make test` is a CPU machine). Where a GPU is
present but SGLang is not (neither here nor in the interpreter named by `AGENTRL_SGLANG_PYTHON`), the tests are
skipped with the reason outside CI and fail with `CI=true`, like the other real-server tests: a GPU runner must
not silently leave its GPU tests out. The server runs in float32 so that transformers on the CPU is a fair
reference.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from typing import Any

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.gpu]

N_TOKENS = 16
LOGPROB_TOL = 1e-2
PROMPT = [{"role": "user", "content": "Write one sentence about the sea."}]


def _gpu_missing() -> str | None:
    """Why there is no CUDA GPU here, or None."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return "no CUDA GPU, which SGLang needs (no nvidia-smi on PATH)"
    try:
        listed = subprocess.run([smi, "-L"], capture_output=True, text=True, check=False, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"no CUDA GPU, which SGLang needs (nvidia-smi -L failed: {e})"
    return None if "GPU" in listed else "no CUDA GPU, which SGLang needs (nvidia-smi -L lists none)"


def _sglang_missing() -> str | None:
    """Why SGLang cannot be launched here, or None."""
    python = os.environ.get("AGENTRL_SGLANG_PYTHON")
    if not python:
        if importlib.util.find_spec("sglang") is None:
            return "SGLang is not installed (pip install sglang, or set AGENTRL_SGLANG_PYTHON)"
        return None
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('sglang') is None)"
    try:
        found = subprocess.run([python, "-c", probe], capture_output=True, check=False, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"AGENTRL_SGLANG_PYTHON={python} cannot be run ({e})"
    return None if found else f"AGENTRL_SGLANG_PYTHON={python} cannot import sglang"


@pytest.fixture(scope="module", autouse=True)
def sglang_and_gpu() -> None:
    """Skip (or, with CI=true and a GPU present, fail) every test here, saying what is missing."""
    ci = os.environ.get("CI", "").lower() == "true"
    if (reason := _gpu_missing()) is not None:
        pytest.skip(f"{reason}; skipped with CI=true too" if ci else reason)
    if (reason := _sglang_missing()) is not None:
        if ci:
            pytest.fail(f"{reason}, on a machine with a GPU (CI=true: not skipping)")
        pytest.skip(reason)


torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from agentrl.rollout.protocol import SamplingParams  # noqa: E402
from agentrl.rollout.servers.sglang import SGLangServer  # noqa: E402

GREEDY = SamplingParams(temperature=0.0, max_tokens=N_TOKENS)


@pytest.fixture(scope="module")
def model_path() -> str:
    from agentrl.models import resolve_model

    return resolve_model("default")


@pytest.fixture(scope="module")
def server(model_path: str) -> Any:
    srv = SGLangServer.launch(model_path, dtype="float32", context_length=512)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def hf_model(model_path: str) -> Any:
    return transformers.AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32).eval()


@pytest.fixture(scope="module")
def prompt_ids(model_path: str) -> list[int]:
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_path)
    ids = tokenizer.apply_chat_template(PROMPT, add_generation_prompt=True, tokenize=True)
    return list(ids["input_ids"] if hasattr(ids, "keys") else ids)


async def test_greedy_and_logprobs_match_transformers(server: Any, hf_model: Any, prompt_ids: list[int]):
    out = await server.generate(prompt_ids, GREEDY)
    with torch.no_grad():
        reference = hf_model.generate(torch.tensor([prompt_ids]), max_new_tokens=N_TOKENS, do_sample=False)
        theirs = reference[0, len(prompt_ids) :].tolist()
        logits = hf_model(torch.tensor([prompt_ids + out.token_ids])).logits[0, len(prompt_ids) - 1 : -1]
    print(f"\nSGLang:       {out.token_ids}\ntransformers: {theirs}")
    assert out.token_ids[:10] == theirs[:10]
    forced = torch.log_softmax(logits.float(), -1).gather(1, torch.tensor(out.token_ids)[:, None])[:, 0]
    diff = (forced - torch.tensor(out.logprobs)).abs().max().item()
    print(f"max |logprob(SGLang) - logprob(transformers fp32)| = {diff:.3e}")
    assert diff < LOGPROB_TOL
    assert out.finish_reason in {"stop", "length"}


async def test_weight_update_changes_output_and_restores(
    server: Any, hf_model: Any, model_path: str, prompt_ids: list[int]
):
    original = (await server.generate(prompt_ids, GREEDY)).token_ids
    generator = torch.Generator().manual_seed(0)
    perturbed = {
        name: tensor + 0.05 * torch.randn(tensor.shape, generator=generator) if tensor.dim() == 2 else tensor
        for name, tensor in hf_model.state_dict().items()
    }
    server.update_weights(perturbed, version=1)
    assert server.policy_version == 1
    assert (await server.generate(prompt_ids, GREEDY)).token_ids != original
    server.update_weights(model_path, version=2)
    restored = await server.generate(prompt_ids, GREEDY)
    assert restored.token_ids == original
    assert restored.policy_version == 2
