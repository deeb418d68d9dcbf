"""What a vLLM weight update hands the server (`agentrl.rollout.servers.vllm.VLLMServer.update_weights`): a folder
of safetensors files, with the tied head vLLM reloads only by its own name, checked against the served model's
tensors from the files' headers alone; and the answers of agentrl's worker extension (`agentrl.vllm_worker`)."""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

if TYPE_CHECKING:
    import torch

HEAD, EMBED = "lm_head.weight", "model.embed_tokens.weight"
EXTENSION = "agentrl.vllm_worker.WeightsExtension"
"""agentrl's worker extension (`--worker-extension-cls`): weight deltas applied inside vLLM."""


def as_weights_folder(weights: Mapping[str, torch.Tensor] | str | os.PathLike[str], scratch: Path) -> Path:
    """A folder of safetensors files holding `weights` (a state dict, a safetensors file or a folder of them),
    written or linked into `scratch`, with `lm_head.weight` always present (a tied head missing from `weights` is
    added as a copy of `model.embed_tokens.weight`: see the module docstring).
    """
    from agentrl.weights_io import save_state_dict  # imports torch: only when weights are written

    if isinstance(weights, Mapping):
        state = dict(weights)
        if HEAD not in state and EMBED in state:
            state[HEAD] = state[EMBED]
        save_state_dict(state, scratch / "model.safetensors", keep=[HEAD])
        return scratch
    path = Path(weights).expanduser().absolute()
    files = sorted(path.glob("*.safetensors")) if path.is_dir() else [path] if path.suffix == ".safetensors" else []
    if not files or not all(f.is_file() for f in files):
        raise ValueError(f"{path} is neither a folder of safetensors files nor a .safetensors file")
    for file in files:
        (scratch / file.name).symlink_to(file)
    holding = {name: file for file in files for name in folder_tensors_of(file)}
    if HEAD not in holding and EMBED in holding:
        from safetensors import safe_open

        with safe_open(str(holding[EMBED]), framework="pt") as f:
            save_state_dict({HEAD: f.get_tensor(EMBED)}, scratch / "agentrl-tied-lm-head.safetensors")
    return scratch


def folder_tensors(folder: Path) -> dict[str, list[int]]:
    """Names and shapes of the tensors in a folder's safetensors files, read from their headers only."""
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise ValueError(f"no .safetensors file in {folder}")
    return {name: shape for file in files for name, shape in folder_tensors_of(file).items()}


def folder_tensors_of(file: Path) -> dict[str, list[int]]:
    """Names and shapes of the tensors of one safetensors file, from its header."""
    return {k: v["shape"] for k, v in _header(file).items() if k != "__metadata__"}


def _header(file: Path) -> dict:
    """A safetensors file's JSON header (read alone, not the tensors)."""
    with file.open("rb") as f:
        return json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))


def check_tensors(expected: dict[str, list[int]], got: dict[str, list[int]]) -> None:
    """Raise `ValueError` listing the missing, unexpected and mis-shaped tensors of `got`."""
    problems = {
        "missing": sorted(set(expected) - set(got)),
        "unexpected": sorted(set(got) - set(expected)),
        "wrong shape": sorted(k for k in set(expected) & set(got) if list(expected[k]) != list(got[k])),
    }
    listed = [f"{label}: {names[:5]}{' ...' * (len(names) > 5)}" for label, names in problems.items() if names]
    if listed:
        raise ValueError("weights do not match the served model: " + "; ".join(listed))


def safetensors_file_metadata(file: Path) -> dict[str, str]:
    """The `__metadata__` of a safetensors file, from its header."""
    return _header(file).get("__metadata__") or {}


def without_tied_head(expected: dict[str, list[int]], got: dict[str, list[int]]) -> dict[str, list[int]]:
    """`got` less a tied head the served model's folder does not list (added for vLLM's reload, not a mismatch)."""
    if HEAD not in expected and EMBED in expected:
        return {name: shape for name, shape in got.items() if name != HEAD}
    return got


def check_extension_answer(response: httpx.Response, method: str, url: str) -> list[dict]:
    """Each worker's answer to an extension `method` (`agentrl.vllm_worker`); raises what the first refusal says:
    `DeltaBaseMismatchError` for a delta against other weights, else `httpx.HTTPError`."""
    from agentrl.weight_delta import DeltaBaseMismatchError

    results = response.json().get("results") or []
    refused = [r for r in results if not (isinstance(r, dict) and r.get("ok"))]
    if not results or refused:
        first = refused[0] if refused else {"error": "no worker answered"}
        error = first.get("error", first) if isinstance(first, dict) else first
        if isinstance(first, dict) and first.get("base_mismatch"):
            raise DeltaBaseMismatchError(f"vLLM at {url}: {error}")
        hint = "" if isinstance(first, dict) else f" (is vLLM started with --worker-extension-cls {EXTENSION}?)"
        raise httpx.HTTPError(f"vLLM at {url} refused {method}: {error}{hint}")
    return results
