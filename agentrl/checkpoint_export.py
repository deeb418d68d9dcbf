"""A trainer checkpoint as a model: `model=runs/<run>/checkpoints/step_000010` starts a run (or an evaluation) from
the policy a run saved, e.g. a curriculum's next stage from the first stage's last checkpoint.

A checkpoint folder (`trainer_state.json`, `engine/policy/`: the layout `agentrl.trainer.checkpoint_dir` writes)
holds the policy's weights in torch's distributed-checkpoint format beside the optimizer's. They are exported once
into `<checkpoint>/model/`, a Hugging Face folder: the weights as safetensors, the configuration and tokenizer
files copied from the model the saving run started from (its run directory's `config.yaml` names it). Exported in
a temporary folder and renamed into place, so an interrupted export is redone, never half-used.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from agentrl.errors import ModelNotFoundError

STATE_FILE = "trainer_state.json"
POLICY_DIR = Path("engine") / "policy"
EXPORT_DIR = "model"
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt", ".pth")


def is_checkpoint(path: Path) -> bool:
    """Whether `path` is a trainer checkpoint folder."""
    return (path / STATE_FILE).is_file() and (path / POLICY_DIR).is_dir()


def exported_model(checkpoint: Path, resolve_base: Callable[[str], str]) -> str:
    """The Hugging Face folder of the checkpoint's policy, exported on first use (`resolve_base` turns the saving
    run's `model` into its folder).

    Raises:
        ModelNotFoundError: the saving run's `config.yaml` is not beside its checkpoints.
    """
    target = checkpoint / EXPORT_DIR
    if (target / "config.json").is_file():
        return str(target.absolute())
    base = Path(resolve_base(_base_model(checkpoint)))
    staging = Path(tempfile.mkdtemp(prefix=".export-", dir=checkpoint))
    try:
        _save_weights(checkpoint / POLICY_DIR, staging / "model.safetensors")
        for file in base.iterdir():
            if (
                file.is_file()
                and not file.name.endswith(WEIGHT_SUFFIXES)
                and file.name != "model.safetensors.index.json"
            ):
                shutil.copy2(file, staging / file.name)
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return str(target.absolute())


def _holds_weights(name: str) -> bool:
    return name.endswith(WEIGHT_SUFFIXES) or name.endswith(".index.json")


def _base_model(checkpoint: Path) -> str:
    config = checkpoint.parent.parent / "config.yaml"
    if not config.is_file():
        raise ModelNotFoundError(
            f"{checkpoint} is a trainer checkpoint, but its run's config.yaml ({config}) is missing: it names the "
            "model whose configuration and tokenizer the checkpoint's weights need"
        )
    from omegaconf import OmegaConf

    return str(OmegaConf.load(config).get("model") or "default")


def _save_weights(policy: Path, out: Path) -> None:
    import torch
    from safetensors.torch import save_file
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        full = Path(tmp) / "full.pt"
        dcp_to_torch_save(str(policy), str(full))
        state = torch.load(full, weights_only=False)["model"]
    if any(".lora_A." in name for name in state):
        raise ModelNotFoundError(
            f"{policy.parent.parent} is a LoRA run's checkpoint: it holds the adapter alone, which is not exported as "
            "a model yet; start from a full fine-tuning run's checkpoint"
        )
    save_file({name: tensor.contiguous() for name, tensor in state.items()}, str(out), metadata={"format": "pt"})
