"""Check, before training starts, that every rollout server can take the trainer's weights, so that a run
never reaches step 1 to find a 404 or a path the server cannot read.

- a Ray server actor (`rollout.placement=ray`): always; the weights go through the object store;
- `hf`: `/v1/weights/version` answers (the file goes by path when the server can read it, else it is uploaded);
- `vllm` / `sglang` reached by URL: the server has its update routes, and it reads our files: it runs on this
  machine, or `rollout.shared_weights_dir` names a folder both hosts see at the same path.
"""

from __future__ import annotations

import contextlib
import socket
from urllib.parse import urlparse

import httpx

from agentrl.config.schema import AgentRLConfig
from agentrl.errors import UserError
from agentrl.rollout.handles import RolloutServer

REQUIRED_ROUTES = {
    "vllm": ("/collective_rpc", "/pause", "/resume", "/update_weight_version", "/weight_info"),
    "sglang": ("/update_weights_from_disk",),
}
START_HINT = {
    "vllm": "start vLLM with VLLM_SERVER_DEV_MODE=1 (as `agentrl serve backend=vllm` does)",
    "sglang": "use an SGLang version with /update_weights_from_disk",
}


class NoWeightRouteError(UserError):
    """A rollout server cannot take the trainer's weights."""


def check_weight_routes(servers: list[RolloutServer], cfg: AgentRLConfig) -> None:
    """Raise `NoWeightRouteError` listing every server whose weights could not be updated, and how to fix it."""
    problems = [problem for server in servers if (problem := weight_route_problem(server, cfg))]
    if problems:
        raise NoWeightRouteError("rollout servers cannot take new weights:\n  - " + "\n  - ".join(problems))


def weight_route_problem(server: RolloutServer, cfg: AgentRLConfig) -> str | None:
    """Why `server` cannot take weights, or None when it can."""
    if getattr(server, "weights_via", "file") == "object_store":
        return None
    if server.backend == "hf":
        return _hf_problem(server)
    try:
        paths = set(httpx.get(f"{server.url}/openapi.json", timeout=10.0).raise_for_status().json()["paths"])
    except (httpx.HTTPError, ValueError, KeyError) as exc:
        return f"{server.backend} server at {server.url}: could not list its routes ({exc}); is it up?"
    missing = [route for route in REQUIRED_ROUTES.get(server.backend, ()) if route not in paths]
    if missing:
        return f"{server.backend} server at {server.url} has no {', '.join(missing)}: {START_HINT[server.backend]}"
    if cfg.rollout.weight_transfer == "nccl":
        return None  # the broadcast needs no file; its own setup fails with what is missing
    if cfg.rollout.shared_weights_dir is None and not is_this_machine(server.url):
        return (
            f"{server.backend} server at {server.url} runs on another host, and {server.backend} loads weights from "
            "a path it can read. Set rollout.shared_weights_dir=DIR (a folder both hosts see at the same path), "
            "let agentrl start the servers on that host with rollout.placement=ray (an actor there loads them), "
            "or on GPU send them by NCCL with rollout.weight_transfer=nccl"
        )
    return None


def _hf_problem(server: RolloutServer) -> str | None:
    try:
        server.served_version()
    except (httpx.HTTPError, ValueError, KeyError) as exc:
        return (
            f"hf server at {server.url} does not report its weight version ({exc}): is it agentrl's `hf` server? "
            "If not, set rollout.backend to what it is (vllm, sglang)"
        )
    return None


def is_this_machine(url: str) -> bool:
    """Whether the URL's host is an address of this machine (it can be bound here)."""
    host = urlparse(url).hostname or ""
    try:
        address = socket.gethostbyname(host)
    except OSError:
        return False
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((address, 0))
        return True
    return False
