"""Loading a transformers causal LM and tokenizer for the `hf` server."""

from __future__ import annotations

from typing import Any

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel

from agentrl.models import from_pretrained

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def parse_dtype(name: str) -> torch.dtype:
    """`float32` / `bfloat16` / `float16` (also `fp32`, `bf16`, `fp16`) to a torch dtype."""
    aliases = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "auto": "float32"}
    key = aliases.get(name, name)
    if key not in DTYPES:
        raise ValueError(f"unknown dtype {name!r}; choose from {sorted(DTYPES)}")
    return DTYPES[key]


def default_device() -> str:
    """`cuda` when a GPU is visible, else `cpu`."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def load_model(path: str, dtype: str = "float32", device: str | None = None) -> PreTrainedModel:
    """Load a causal LM in eval mode on `device` with the SDPA attention implementation."""
    kwargs: dict[str, Any] = {"attn_implementation": "sdpa"}
    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    dtype_key = "dtype" if (major, minor) >= (4, 56) else "torch_dtype"
    kwargs[dtype_key] = parse_dtype(dtype)
    model: PreTrainedModel = from_pretrained(AutoModelForCausalLM, path, **kwargs)
    model.to(torch.device(device or default_device()))  # type: ignore[arg-type]  # transformers' wrapper typing
    return model.eval()


def load_tokenizer(path: str) -> Any:
    """The model's tokenizer (fast when available)."""
    return AutoTokenizer.from_pretrained(path)


def eos_token_ids(model: torch.nn.Module, tokenizer: Any | None) -> frozenset[int]:
    """Token ids that end generation: the generation config's eos ids plus the tokenizer's eos id."""
    ids: set[int] = set()
    gen_cfg = getattr(model, "generation_config", None)
    eos = getattr(gen_cfg, "eos_token_id", None)
    if isinstance(eos, int):
        ids.add(eos)
    elif isinstance(eos, list | tuple):
        ids.update(int(e) for e in eos)
    tok_eos = getattr(tokenizer, "eos_token_id", None)
    if isinstance(tok_eos, int):
        ids.add(tok_eos)
    return frozenset(ids)
