"""SGLang rollout backend: the native `/generate` API (token ids in, token ids and logprobs out) and
`/update_weights_from_disk`. SGLang needs a GPU; this module itself imports neither SGLang nor torch.

Wire format (SGLang's `GenerateReqInput` and its tokenizer manager's output):
- request: `{"input_ids": [...], "sampling_params": {"max_new_tokens", "temperature", "top_p", "top_k",
  "stop", "stop_token_ids", "sampling_seed"}, "return_logprob": true, "logprob_start_len": -1}`;
- response: `{"text", "output_ids": [...], "meta_info": {"finish_reason": {"type": "stop"|"length"|"abort",
  ...}, "output_token_logprobs": [[logprob, token_id, text|null], ...], "weight_version", ...}}`. Versions
  without `output_ids` are read from the token ids of `output_token_logprobs`.
- weight update: `POST /update_weights_from_disk {"model_path": DIR, "weight_version": "3",
  "abort_all_requests": bool}` answers `{"success", "message", ...}`; SGLang reloads the folder's safetensors
  in place. The version is tracked here too, as SGLang echoes it back as a string.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Self

import httpx

from agentrl.rollout.client import TokenOutput
from agentrl.rollout.errors import ProtocolError
from agentrl.rollout.protocol import SamplingParams
from agentrl.rollout.servers.process import ManagedServer, apply_overrides, free_port
from agentrl.rollout.servers.vllm import as_weights_folder

if TYPE_CHECKING:
    import torch

_FINISH_TYPES = {"stop": "stop", "length": "length", "abort": "abort"}
_MODEL_FILES = ("config.json", "generation_config.json")


def generate_request(prompt_ids: list[int], sampling: SamplingParams) -> dict[str, Any]:
    """The `/generate` body for one completion of `prompt_ids`, with logprobs of the output tokens only."""
    params: dict[str, Any] = {
        "max_new_tokens": sampling.max_tokens,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "top_k": sampling.top_k,
    }
    if sampling.stop:
        params["stop"] = list(sampling.stop)
    if sampling.stop_token_ids:
        params["stop_token_ids"] = list(sampling.stop_token_ids)
    if sampling.seed is not None:
        params["sampling_seed"] = sampling.seed
    return {
        "input_ids": list(prompt_ids),
        "sampling_params": params,
        "return_logprob": True,
        "logprob_start_len": -1,
        "stream": False,
    }


def parse_generate_response(data: Any, url: str = "sglang") -> TokenOutput:
    """A `TokenOutput` from a `/generate` response; raises `ProtocolError` if ids or logprobs are missing."""
    if isinstance(data, list):  # a batch answer: we always send one prompt
        if len(data) != 1:
            raise ProtocolError(f"{url} answered {len(data)} completions for one prompt")
        data = data[0]
    meta = data.get("meta_info") if isinstance(data, dict) else None
    if not isinstance(meta, dict):
        raise ProtocolError(f"{url} answered without meta_info: {str(data)[:200]}")
    entries = meta.get("output_token_logprobs")
    if entries is None:
        raise ProtocolError(f"{url} returned no output_token_logprobs; the request must set return_logprob")
    logprobs = [float(entry[0]) for entry in entries]
    token_ids = data.get("output_ids")
    if token_ids is None:
        token_ids = [int(entry[1]) for entry in entries]
    elif [int(entry[1]) for entry in entries] != list(token_ids):
        raise ProtocolError(f"{url}: output_ids and the token ids of output_token_logprobs differ")
    return TokenOutput(
        token_ids=list(token_ids),
        logprobs=logprobs,
        finish_reason=parse_finish_reason(meta.get("finish_reason")),
        policy_version=_as_int(meta.get("weight_version")),
        replica=url,
    )


def parse_finish_reason(reason: Any) -> str | None:
    """SGLang's `{"type": "stop"|"length"|"abort", ...}` (or a bare string) as `stop`, `length` or `abort`."""
    if reason is None:
        return None
    kind = reason.get("type") if isinstance(reason, dict) else str(reason)
    return _FINISH_TYPES.get(str(kind), str(kind))


def weight_update_request(model_path: str, version: int, abort_in_flight: bool) -> dict[str, Any]:
    """The `/update_weights_from_disk` body."""
    return {"model_path": model_path, "weight_version": str(version), "abort_all_requests": abort_in_flight}


def _as_int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


@dataclass
class SGLangConfig:
    """How to launch SGLang. More flags go in `extra_args`."""

    dtype: str = "auto"
    """Model dtype (`auto`, `bfloat16`, `float32`)."""
    context_length: int | None = None
    """Context length (the model's when None)."""
    extra_args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    startup_timeout: float = 900.0
    python: str | None = None
    """Interpreter with SGLang; default env `AGENTRL_SGLANG_PYTHON`, then this one."""
    log_path: str | None = None


def build_command(python: str, model: str, port: int, host: str, cfg: SGLangConfig) -> list[str]:
    """The command line that starts SGLang's HTTP server."""
    cmd = [python, "-m", "sglang.launch_server", "--model-path", model, "--host", host, "--port", str(port)]
    cmd += ["--dtype", cfg.dtype]
    if cfg.context_length is not None:
        cmd += ["--context-length", str(cfg.context_length)]
    return cmd + list(cfg.extra_args)


class SGLangServer(ManagedServer):
    """An SGLang server, launched here (`launch`) or already running (`connect`).

    Attributes:
        base_url: `http://host:port` of the server (also `url`).
        model_path: The served model folder, when known (its config goes along with new weights).
        policy_version: Version of the weights being served, as set by `update_weights`.
    """

    backend = "sglang"

    @classmethod
    def launch(
        cls,
        model: str = "default",
        *,
        port: int | None = None,
        host: str = "127.0.0.1",
        config: SGLangConfig | None = None,
        **overrides: Any,
    ) -> Self:
        """Start SGLang on `model` and return once `/health` answers (`ServerStartError` with its log if not)."""
        from agentrl.models import resolve_model

        cfg = config or SGLangConfig()
        apply_overrides(cfg, overrides)
        model_path = resolve_model(model)
        port = port or free_port(host)
        python = cfg.python or os.environ.get("AGENTRL_SGLANG_PYTHON") or sys.executable
        cmd = build_command(python, model_path, port, host, cfg)
        return cls.start_process(
            cmd,
            host=host,
            port=port,
            model_path=model_path,
            env={"HF_HUB_OFFLINE": "1", **cfg.env},
            log_path=cfg.log_path,
            name="sglang",
            startup_timeout=cfg.startup_timeout,
        )

    async def generate(self, prompt_ids: list[int], sampling: SamplingParams, timeout: float = 600.0) -> TokenOutput:
        """One completion through `/generate`: the same contract as `LLMClient.generate`."""
        async with httpx.AsyncClient(timeout=timeout) as http:
            response = await http.post(f"{self.base_url}/generate", json=generate_request(prompt_ids, sampling))
        response.raise_for_status()
        out = parse_generate_response(response.json(), self.base_url)
        if out.policy_version is None:
            out.policy_version = self.policy_version
        return out

    def update_weights(
        self,
        weights: Mapping[str, torch.Tensor] | str | os.PathLike[str],
        version: int,
        in_flight: Literal["finish", "abort"] = "finish",
        timeout: float = 600.0,
    ) -> None:
        """Load new weights (state dict, safetensors file or model folder) and serve them as `version`.

        A state dict or file is written to a temporary folder with the served model's config files beside it;
        the path must be readable by the server. `in_flight="abort"` aborts running requests first.
        """
        with tempfile.TemporaryDirectory(prefix="agentrl-sglang-weights-") as tmp:
            folder = as_weights_folder(weights, Path(tmp))
            if folder == Path(tmp):
                self._add_model_files(folder)
            body = weight_update_request(str(folder), version, in_flight == "abort")
            response = httpx.post(f"{self.base_url}/update_weights_from_disk", json=body, timeout=timeout)
        result = response.json() if response.headers.get("content-type", "").startswith("application/json") else {}
        if response.status_code >= 400 or not result.get("success", False):
            raise httpx.HTTPStatusError(
                f"SGLang update_weights_from_disk failed (HTTP {response.status_code}): "
                f"{result.get('message') or response.text[:500]}",
                request=response.request,
                response=response,
            )
        self.policy_version = version

    def _add_model_files(self, folder: Path) -> None:
        """Link the served model's config files into `folder`, so that it is a complete model folder."""
        if self.model_path is None:
            return
        for name in _MODEL_FILES:
            source = Path(self.model_path) / name
            if source.is_file():
                (folder / name).symlink_to(source)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
