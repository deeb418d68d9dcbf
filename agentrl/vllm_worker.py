"""agentrl's vLLM worker extension: weight deltas applied inside vLLM (`agentrl.weight_delta`).

vLLM mixes it into each of its workers when started with `--worker-extension-cls
agentrl.vllm_worker.WeightsExtension` (as `VLLMServer.launch` does, with this package on vLLM's path); its methods
are reached through vLLM's `POST /collective_rpc`. A worker that takes a full push through it keeps a copy of the
weights it loaded (by their checkpoint names, in the served dtype, on the CPU) and the id the trainer gave them; a
delta is then applied to that copy and the whole copy reloaded through vLLM's own in-place reload
(`reload_weights` with an iterator: its fused and repacked layers are rebuilt from checkpoint names as on a
reload from disk). So what vLLM serves is the trainer's cast, bit for bit, and only the delta crosses from the
trainer. The copy costs host memory of one model in the served dtype, and is made only for a server that takes
deltas.

This module runs inside vLLM's environment: it needs torch, safetensors, zstandard and numba there
(`install_vllm.sh`; vLLM itself depends on numba), and imports nothing of agentrl beyond `agentrl.weight_delta`.
Where the codec's modules are missing it answers no dtype, and the trainer pushes full weights. Its methods never
raise: an exception in a worker RPC can end vLLM's engine, so each answers `{"ok": False, "error": ...}` instead
(`"base_mismatch": True` for a delta against weights the worker does not hold: the trainer then pushes in full).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

HEAD, EMBED = "lm_head.weight", "model.embed_tokens.weight"


class WeightsExtension:
    """Methods added to every vLLM worker for agentrl's weight pushes (see the module docstring)."""

    def agentrl_weights_dtype(self) -> dict[str, Any]:
        """The dtype the worker serves in (`bfloat16`, `float32`, ...): the trainer casts its deltas to it. Not
        answered where vLLM's environment lacks a module the delta codec needs (the trainer sends full weights)."""
        missing = _codec_missing()
        if missing:
            return {"ok": False, "error": f"agentrl's weight deltas need {missing} in vLLM's environment"}
        return {"ok": True, "dtype": str(self.model_config.dtype).removeprefix("torch.")}  # type: ignore[attr-defined]

    def agentrl_load_weights(self, path: str) -> dict[str, Any]:
        """Load the safetensors file at `path` (a full push, named by its `agentrl_weights_id` metadata) and keep
        a copy of it as the base of the next delta."""
        try:
            from safetensors import safe_open
            from safetensors.torch import load_file

            from agentrl.weight_delta import WEIGHTS_ID_KEY

            with safe_open(path, framework="pt") as file:
                weights_id = (file.metadata() or {}).get(WEIGHTS_ID_KEY, "")
            held = load_file(path)
            self._agentrl_reload(held)
        except Exception as exc:  # answered, never raised: see the module docstring
            self._agentrl_forget()
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        self._agentrl_held, self._agentrl_held_id = held, weights_id
        return {"ok": True, "weights_id": weights_id}

    def agentrl_apply_delta(self, path: str) -> dict[str, Any]:
        """Apply the delta at `path` (`agentrl.weight_delta.encode_delta`) to the weights kept from the last push,
        and serve the result."""
        try:
            from agentrl.weight_delta import DeltaBaseMismatchError, apply_delta, check_delta, decode_delta

            held = getattr(self, "_agentrl_held", None)
            delta = decode_delta(Path(path).read_bytes())
            if held is None:
                raise DeltaBaseMismatchError(f"this vLLM worker holds no pushed weights to apply a delta to ({path})")
            check_delta(delta, held, self._agentrl_held_id)
        except Exception as exc:  # nothing was changed yet
            mismatch = type(exc).__name__ == "DeltaBaseMismatchError"
            return {"ok": False, "base_mismatch": mismatch, "error": f"{type(exc).__name__}: {exc}"}
        try:
            apply_delta(delta, held)
            self._agentrl_reload(held)
        except Exception as exc:  # half applied: what it holds is no base for the next delta
            self._agentrl_forget()
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        self._agentrl_held_id = delta.new_id
        return {"ok": True, "weights_id": delta.new_id}

    def agentrl_weights_digest(self) -> dict[str, Any]:
        """`agentrl.weight_delta.weights_digest` of the weights the worker loaded last through this extension."""
        held = getattr(self, "_agentrl_held", None)
        if held is None:
            return {"ok": False, "error": "no weights were pushed to this vLLM worker through agentrl's extension"}
        from agentrl.weight_delta import weights_digest

        return {"ok": True, "digest": weights_digest(held), "weights_id": self._agentrl_held_id}

    def _agentrl_reload(self, held: dict[str, Any]) -> None:
        weights = dict(held)
        tied = getattr(self.model_config.hf_config, "tie_word_embeddings", False)  # type: ignore[attr-defined]
        if tied and HEAD not in weights and EMBED in weights:
            weights[HEAD] = weights[EMBED]  # vLLM reloads its copy of a tied head from this name only
        # copies: what vLLM's loaders do with a tensor they are given is theirs, the kept base is ours
        copies = ((name, tensor.clone()) for name, tensor in weights.items())
        self.reload_weights(weights_iterator=copies)  # type: ignore[attr-defined]

    def _agentrl_forget(self) -> None:
        self._agentrl_held, self._agentrl_held_id = None, ""


def _codec_missing() -> str | None:
    """The first module the delta codec needs that this environment cannot import, if any."""
    for module in ("zstandard", "numba"):
        try:
            importlib.import_module(module)
        except ImportError:
            return module
    return None
