"""agentrl's vLLM worker extension (`agentrl.vllm_worker`) on a stand-in worker: what it keeps, what it reloads,
and that it answers rather than raises. The real vLLM runs it in tests/integration/test_matrix_real.py."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from agentrl.rollout.servers.vllm import VLLMConfig, VLLMServer, build_command, build_env
from agentrl.rollout.servers.vllm_weights import EXTENSION
from agentrl.vllm_worker import EMBED, HEAD, WeightsExtension
from agentrl.weight_delta import WEIGHTS_ID_KEY, cast_state, encode_delta, weights_digest
from agentrl.weights_io import save_state_dict

torch = pytest.importorskip("torch")


class StandInWorker(WeightsExtension):
    """What the extension uses of a vLLM worker: its model config and its in-place reload."""

    def __init__(self, tied: bool = True, fail_reload: bool = False):
        self.model_config = SimpleNamespace(dtype=torch.bfloat16, hf_config=SimpleNamespace(tie_word_embeddings=tied))
        self.reloads: list[dict[str, torch.Tensor]] = []
        self.fail_reload = fail_reload

    def reload_weights(self, weights_iterator):
        if self.fail_reload:
            raise RuntimeError("the engine broke")
        self.reloads.append(dict(weights_iterator))


def weights(seed: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    state = {EMBED: torch.randn(16, 8, generator=generator), "model.norm.weight": torch.ones(8)}
    return cast_state(state, torch.bfloat16)


def full_file(tmp_path: Path, state: dict[str, torch.Tensor], weights_id: str) -> str:
    return str(save_state_dict(state, tmp_path / f"{weights_id}.safetensors", metadata={WEIGHTS_ID_KEY: weights_id}))


def delta_file(tmp_path: Path, new, old, base_id: str, new_id: str) -> str:
    path = tmp_path / f"{new_id}.delta"
    path.write_bytes(encode_delta(new, old, base_id=base_id, base_version=1, new_id=new_id, version=2))
    return str(path)


def test_a_full_push_is_kept_and_a_delta_on_it_serves_the_new_weights_bit_for_bit(tmp_path: Path):
    worker, old, new = StandInWorker(), weights(0), weights(0)
    new[EMBED] = (new[EMBED].float() + 0.01 * torch.randn(16, 8)).to(torch.bfloat16)
    ids = [uuid.uuid4().hex for _ in range(2)]
    assert worker.agentrl_weights_dtype() == {"ok": True, "dtype": "bfloat16"}
    assert worker.agentrl_load_weights(full_file(tmp_path, old, ids[0])) == {"ok": True, "weights_id": ids[0]}
    assert torch.equal(worker.reloads[0][HEAD], old[EMBED])  # the tied head, from its only name vLLM reloads
    assert worker.agentrl_apply_delta(delta_file(tmp_path, new, old, *ids)) == {"ok": True, "weights_id": ids[1]}
    reloaded = worker.reloads[1]
    assert all(torch.equal(reloaded[name], new[name]) for name in new) and torch.equal(reloaded[HEAD], new[EMBED])
    assert worker.agentrl_weights_digest()["digest"] == weights_digest(new)
    reloaded[EMBED].zero_()  # what vLLM does with the tensors it is given never reaches the kept base
    assert worker.agentrl_weights_digest()["digest"] == weights_digest(new)


def test_a_delta_against_other_weights_is_refused_as_a_base_mismatch_and_changes_nothing(tmp_path: Path):
    worker, old, new = StandInWorker(tied=False), weights(0), weights(1)
    assert worker.agentrl_apply_delta(delta_file(tmp_path, new, old, "a", "b"))["base_mismatch"]  # holds nothing
    worker.agentrl_load_weights(full_file(tmp_path, old, "held"))
    answer = worker.agentrl_apply_delta(delta_file(tmp_path, new, old, "other", "b"))
    assert answer["ok"] is False and answer["base_mismatch"] and "push the full weights" in answer["error"]
    assert len(worker.reloads) == 1 and HEAD not in worker.reloads[0]  # untied: no head added
    assert worker.agentrl_weights_digest()["digest"] == weights_digest(old)


def test_failures_are_answered_never_raised_and_a_broken_reload_forgets_the_base(tmp_path: Path):
    worker = StandInWorker()
    garbage = tmp_path / "garbage"
    garbage.write_bytes(b"\x28\xb5\x2f\xfd not a frame")
    answer = worker.agentrl_apply_delta(str(garbage))
    assert answer["ok"] is False and not answer["base_mismatch"] and "DeltaError" in answer["error"]
    assert worker.agentrl_load_weights(str(tmp_path / "missing.safetensors"))["ok"] is False
    broken = StandInWorker(fail_reload=True)
    answer = broken.agentrl_load_weights(full_file(tmp_path, weights(0), "x"))
    assert answer == {"ok": False, "error": "RuntimeError: the engine broke"}
    assert broken.agentrl_weights_digest()["ok"] is False  # no base kept: the next push is full


def test_the_launch_loads_the_extension_from_a_path_that_holds_agentrl_alone():
    cmd = build_command("py", "m", 1, "h", VLLMConfig())
    assert cmd[cmd.index("--worker-extension-cls") + 1] == EXTENSION
    root = Path(build_env(VLLMConfig())["PYTHONPATH"].split(":")[0])
    assert [p.name for p in root.iterdir()] == ["agentrl"]
    probe = "import agentrl.vllm_worker as m, sys; print(m.__file__, 'torch' in sys.modules)"
    env = {"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", probe], cwd="/", env=env, capture_output=True, text=True, check=True)
    # found through the link (ahead of this environment), and cheap to import: torch loads on first use
    assert done.stdout.split() == [str(root / "agentrl" / "vllm_worker.py"), "False"]


def test_a_push_goes_to_the_extension_when_it_is_a_delta_or_names_its_weights(tmp_path: Path):
    server = VLLMServer("http://127.0.0.1:9")
    named, plain = weights(0), weights(0)
    named_file = full_file(tmp_path, named, "id")
    plain_file = str(save_state_dict(plain, tmp_path / "plain.safetensors"))
    delta = delta_file(tmp_path, weights(1), weights(0), "id", "next")
    assert server._load_step(delta, tmp_path)["method"] == "agentrl_apply_delta"
    assert server._load_step(named_file, tmp_path) == {"method": "agentrl_load_weights", "kwargs": {"path": named_file}}
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    reload = {"method": "reload_weights", "kwargs": {"weights_path": str(scratch)}}
    assert server._load_step(plain_file, scratch) == reload


def test_a_vllm_without_the_codecs_modules_answers_no_dtype_so_it_gets_full_pushes(monkeypatch):
    monkeypatch.setitem(sys.modules, "numba", None)  # importing it raises ImportError, as where it is missing
    answer = StandInWorker().agentrl_weights_dtype()
    assert answer["ok"] is False and "numba" in answer["error"]
