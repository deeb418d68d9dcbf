"""SGLang rollout backend: the native `/generate` API (token ids in, token ids and logprobs out), weight updates
from disk or over NCCL, pause/continue, abort and the served weight version. SGLang needs a GPU; this module itself
imports neither SGLang nor torch.

Generation goes through `/generate` (its wire format in `agentrl.rollout.sglang_generate`): a reply's version is
the `meta_info.weight_version` SGLang reports, never this handle's own record.

Weight update: `POST /update_weights_from_disk {"model_path": DIR, "weight_version": "3", "abort_all_requests":
bool}` answers `{"success", "message", ...}`; SGLang reloads the folder's safetensors in place and labels its
replies with the new `weight_version` (a string; read back from `/model_info` after each update).

Control routes, checked against SGLang 0.5.23 (the PyPI wheel, sha256 00b3cd5b...9937:
`sglang/srt/entrypoints/http_server.py` for routes, `sglang/srt/managers/io_struct.py` for bodies):
- `POST /abort_request {"abort_all": true}` (`AbortReq`) answers an empty 200;
- `POST /pause_generation {"mode": "abort"|"retract"|"in_place"}` (`PauseGenerationReqInput`) and
  `POST /continue_generation {}` (`ContinueGenerationReqInput`);
- `GET /model_info` reports `weight_version` (`"default"` until an update sets one); older SGLang has only
  `/get_model_info`, which 0.5.23 keeps as a deprecated alias;
- NCCL: `POST /init_weights_update_group {"master_address", "master_port", "rank_offset", "world_size",
  "group_name", "backend"}` (`InitWeightsUpdateGroupReqInput`), then per update `POST
  /update_weights_from_distributed {"names", "dtypes", "shapes", "group_name", "flush_cache",
  "abort_all_requests", "weight_version"}` (`UpdateWeightsFromDistributedReqInput`), each answering
  `{"success", "message"}`. The server joins the group as ranks `rank_offset + tp_rank` and receives each tensor
  by `broadcast(src=0)` in the order of `names`, as `getattr(torch, dtype)`; the sender is
  `agentrl.rollout.servers.sglang_nccl.SGLangNcclSender`. A weight update waits for requests in flight to finish
  (they hold SGLang's model-update lock) unless `abort_all_requests` ends them first.

Off loopback every one of those routes is open to anyone who reaches the port (`/update_weights_from_disk` loads
any folder on the host), so a server on a host other machines reach starts only with a weights token
(`agentrl.weights_token`), passed as SGLang's `--admin-api-key`: 0.5.23 then refuses its admin routes (all of the
above: `@auth_level(AuthLevel.ADMIN_OPTIONAL)`) without `Authorization: Bearer <token>`, while `/generate`,
`/model_info` and `/health` stay open (`sglang/srt/utils/auth.py`, `decide_request_auth`). The handle sends it.
SGLang applies no key with `--tokenizer-worker-num` > 1 (its routes would stay open): `launch` refuses that with a
token; with `--grpc-port` SGLang refuses a key itself.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Self

import httpx

from agentrl.errors import UserError
from agentrl.rollout.completions import TokenOutput
from agentrl.rollout.protocol import SamplingParams
from agentrl.rollout.servers.process import ManagedServer, apply_overrides, free_port
from agentrl.rollout.servers.vllm_weights import as_weights_folder
from agentrl.rollout.sglang_generate import GENERATE_PATH, generate_request, parse_generate_response
from agentrl.weights_token import WEIGHTS_TOKEN_ENV, token_for_host

if TYPE_CHECKING:
    import torch

PauseMode = Literal["abort", "retract", "in_place"]
DEFAULT_GROUP = "agentrl_weights"
"""Name of the NCCL weight-update group (SGLang's own default is `weight_update_group`)."""
FP32_ATTENTION_BACKEND = "torch_native"
CHECKED_VERSION = "SGLang 0.5.23"
"""The SGLang whose HTTP server the routes and bodies here were checked against (see the module docstring)."""

_MODEL_FILES = ("config.json", "generation_config.json")
_FP32_NAMES = {"float32", "float"}


def weight_update_request(model_path: str, version: int, abort_in_flight: bool) -> dict[str, Any]:
    """The `/update_weights_from_disk` body."""
    return {"model_path": model_path, "weight_version": str(version), "abort_all_requests": abort_in_flight}


def pause_request(mode: PauseMode) -> dict[str, Any]:
    """The `/pause_generation` body."""
    return {"mode": mode}


def init_group_request(
    master_address: str,
    master_port: int,
    rank_offset: int,
    world_size: int,
    group_name: str = DEFAULT_GROUP,
    backend: str = "nccl",
) -> dict[str, Any]:
    """The `/init_weights_update_group` body: join the trainer's group as ranks `rank_offset + tp_rank`."""
    return {
        "master_address": master_address,
        "master_port": int(master_port),
        "rank_offset": int(rank_offset),
        "world_size": int(world_size),
        "group_name": group_name,
        "backend": backend,
    }


def distributed_update_request(
    names: Sequence[str],
    dtypes: Sequence[str],
    shapes: Sequence[Sequence[int]],
    version: int,
    abort_in_flight: bool,
    group_name: str = DEFAULT_GROUP,
) -> dict[str, Any]:
    """The `/update_weights_from_distributed` body: the tensors the trainer broadcasts next, in that order.

    `dtypes` are torch attribute names (`bfloat16`, `float32`): SGLang allocates each with `getattr(torch, dtype)`.
    The prefix cache is flushed, as its KV came from the old weights.
    """
    if not len(names) == len(dtypes) == len(shapes):
        raise ValueError(f"{len(names)} names, {len(dtypes)} dtypes and {len(shapes)} shapes: one of each per tensor")
    return {
        "names": list(names),
        "dtypes": list(dtypes),
        "shapes": [[int(n) for n in shape] for shape in shapes],
        "group_name": group_name,
        "flush_cache": True,
        "abort_all_requests": abort_in_flight,
        "weight_version": str(version),
    }


def served_weight_version(model_info: Any) -> int | None:
    """The policy version in a `/model_info` answer: its `weight_version` as an int, 0 for SGLang's initial
    `"default"` (the weights it started with), None when it reports none or a label that is not ours."""
    raw = model_info.get("weight_version") if isinstance(model_info, dict) else None
    if raw == "default":
        return 0
    return _as_int(raw)


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
    attention_backend: str | None = None
    """`--attention-backend`; None: `torch_native` for float32 (see `attention_backend_for`), else SGLang's own."""
    context_length: int | None = None
    """Context length (the model's when None)."""
    extra_args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    startup_timeout: float = 900.0
    python: str | None = None
    """Interpreter with SGLang; default env `AGENTRL_SGLANG_PYTHON`, then this one."""
    log_path: str | None = None


def build_command(
    python: str, model: str, port: int, host: str, cfg: SGLangConfig, token: str | None = None
) -> list[str]:
    """The command line that starts SGLang's HTTP server; with a weights `token`, its admin routes need it."""
    cmd = [python, "-m", "sglang.launch_server", "--model-path", model, "--host", host, "--port", str(port)]
    cmd += ["--dtype", cfg.dtype]
    backend = cfg.attention_backend or attention_backend_for(cfg.dtype)
    if backend is not None and "--attention-backend" not in cfg.extra_args:
        cmd += ["--attention-backend", backend]
    if cfg.context_length is not None:
        cmd += ["--context-length", str(cfg.context_length)]
    if token is not None:
        cmd += ["--admin-api-key", token]
    return cmd + list(cfg.extra_args)


def attention_backend_for(dtype: str) -> str | None:
    """The attention backend to ask SGLang for with `dtype`; None leaves SGLang's own choice.

    SGLang picks its backend by GPU, not by dtype (fa3 on Hopper, trtllm_mha on Blackwell, else flashinfer), and
    those kernels take fp16/bf16 only. For float32 this asks for `torch_native` (PyTorch SDPA), which computes in
    fp32, where `triton` would run its fp32 matmuls as TF32 (Triton's default) and lose the precision float32 was
    chosen for. SGLang turns CUDA graphs off with `torch_native` by itself.
    """
    return FP32_ATTENTION_BACKEND if dtype.lower() in _FP32_NAMES else None


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
        token: str | None = None,
        **overrides: Any,
    ) -> Self:
        """Start SGLang on `model` and return once `/health` answers.

        With a weights `token` (else AGENTRL_WEIGHTS_TOKEN, from `config.env` or this environment) its weight and
        control routes need it; a `host` other machines reach needs one.

        Raises:
            MissingTokenError: `host` is not loopback and there is no token (nothing is started).
            ServerStartError: the server died or did not start within `startup_timeout` (with its log tail).
        """
        from agentrl.models import resolve_model

        cfg = config or SGLangConfig()
        apply_overrides(cfg, overrides)
        token = token_for_host(host, token or cfg.env.get(WEIGHTS_TOKEN_ENV), "SGLang")
        if token is not None and _several_tokenizers(cfg.extra_args):
            raise UserError(
                "SGLang guards its weight routes with a key only with one tokenizer worker: drop "
                "--tokenizer-worker-num from extra_args, or serve on 127.0.0.1 without a weights token"
            )
        model_path = resolve_model(model)
        port = port or free_port(host)
        python = cfg.python or os.environ.get("AGENTRL_SGLANG_PYTHON") or sys.executable
        cmd = build_command(python, model_path, port, host, cfg, token)
        return cls.start_process(
            cmd,
            host=host,
            port=port,
            model_path=model_path,
            env={"HF_HUB_OFFLINE": "1", **cfg.env},
            log_path=cfg.log_path,
            name="sglang",
            startup_timeout=cfg.startup_timeout,
            token=token,
        )

    async def generate(self, prompt_ids: list[int], sampling: SamplingParams, timeout: float = 600.0) -> TokenOutput:
        """One completion through `/generate`: the same contract as `LLMClient.generate`. Its version is the one
        SGLang reports (`meta_info.weight_version`), None when it reports none of ours."""
        async with httpx.AsyncClient(timeout=timeout) as http:
            response = await http.post(self.base_url + GENERATE_PATH, json=generate_request(prompt_ids, sampling))
        response.raise_for_status()
        return parse_generate_response(response.json(), self.base_url)

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

        Raises:
            httpx.HTTPError: SGLang refused the update, or serves another version after it.
        """
        with tempfile.TemporaryDirectory(prefix="agentrl-sglang-weights-") as tmp:
            folder = as_weights_folder(weights, Path(tmp))
            if folder == Path(tmp):
                self._add_model_files(folder)
            body = weight_update_request(str(folder), version, in_flight == "abort")
            self._post("/update_weights_from_disk", body, timeout)
        self._confirm_version(version)

    abort_route = ("/abort_request", {"abort_all": True})

    def served_version(self) -> int | None:
        """The weight version SGLang reports (`GET /model_info`): 0 for the weights it started with.

        Raises:
            httpx.HTTPError: the server did not answer.
        """
        with self.http(10.0) as http:
            answer = http.get("/model_info")
            if answer.status_code == 404:  # SGLang from before /model_info
                answer = http.get("/get_model_info")
        _raise_for_status(answer, "model_info")
        return served_weight_version(answer.json())

    def pause(self, mode: PauseMode = "retract", timeout: float = 600.0) -> None:
        """Stop scheduling: `retract` puts running requests back in the queue (their KV is recomputed on
        `resume`), `abort` ends them (`finish_reason: abort`), `in_place` freezes them with their KV cache."""
        self._post("/pause_generation", pause_request(mode), timeout)

    def resume(self, timeout: float = 60.0) -> None:
        """Schedule again after `pause`."""
        self._post("/continue_generation", {}, timeout)

    def init_weights_update_group(
        self,
        master_address: str,
        master_port: int,
        rank_offset: int,
        world_size: int,
        group_name: str = DEFAULT_GROUP,
        backend: str = "nccl",
        timeout: float = 600.0,
    ) -> None:
        """Join the trainer's NCCL group as ranks `rank_offset + tp_rank`.

        Blocks until every rank has joined: the trainer opens its side (rank 0) meanwhile, from another thread
        (see `SGLangNcclSender`).
        """
        body = init_group_request(master_address, master_port, rank_offset, world_size, group_name, backend)
        self._post("/init_weights_update_group", body, timeout)

    def update_weights_from_distributed(
        self,
        names: Sequence[str],
        dtypes: Sequence[str],
        shapes: Sequence[Sequence[int]],
        version: int,
        in_flight: Literal["finish", "abort"] = "finish",
        group_name: str = DEFAULT_GROUP,
        timeout: float = 600.0,
    ) -> None:
        """Receive the tensors the trainer broadcasts over the group of `init_weights_update_group`, in the order of
        `names`, and serve them as `version`.

        Blocks until every tensor has arrived: the trainer broadcasts meanwhile, from another thread. With
        `in_flight="finish"` SGLang first waits for the requests in flight; `abort` ends them.

        Raises:
            httpx.HTTPError: SGLang refused the update, or serves another version after it.
        """
        body = distributed_update_request(names, dtypes, shapes, version, in_flight == "abort", group_name)
        self._post("/update_weights_from_distributed", body, timeout)
        self._confirm_version(version)

    def _confirm_version(self, version: int) -> None:
        """Read the served version back; raise `httpx.HTTPError` unless it is `version`."""
        served = self.served_version()
        if served != version:
            raise httpx.HTTPError(f"SGLang at {self.base_url} serves version {served} after an update to {version}")
        self.policy_version = version

    def _post(self, path: str, body: dict[str, Any], timeout: float) -> None:
        """POST `body` to `path`; raise if SGLang answers an error or `"success": false`."""
        with self.http(timeout) as http:
            _raise_for_status(http.post(path, json=body), path.lstrip("/"))

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


def _several_tokenizers(args: Sequence[str]) -> bool:
    """Whether SGLang flags `args` ask for more than one tokenizer worker."""
    for i, arg in enumerate(args):
        name, _, value = arg.partition("=")
        if name == "--tokenizer-worker-num":
            value = value or (args[i + 1] if i + 1 < len(args) else "1")
            return value.strip() != "1"
    return False


def _raise_for_status(response: httpx.Response, step: str) -> None:
    """Raise `httpx.HTTPStatusError` with SGLang's message when `step` failed (an error status or `success: false`)."""
    is_json = response.headers.get("content-type", "").startswith("application/json")
    result = response.json() if is_json else {}
    failed = isinstance(result, dict) and result.get("success") is False
    if response.status_code < 400 and not failed:
        return
    message = (result.get("message") if isinstance(result, dict) else None) or response.text[:500]
    hint = ""
    if response.status_code == 404:
        hint = f" (no such route: upgrade SGLang; agentrl speaks to {CHECKED_VERSION})"
    elif response.status_code in (401, 403):
        hint = f" (the server takes control calls with its weights token: set {WEIGHTS_TOKEN_ENV} to it)"
    raise httpx.HTTPStatusError(
        f"SGLang {step} failed (HTTP {response.status_code}): {message}{hint}",
        request=response.request,
        response=response,
    )
