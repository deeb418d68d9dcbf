"""What the NCCL weight senders of vLLM and SGLang share: the rank layout of the trainer-to-servers group, and
the check that this process can take part in one.

The group has the trainer (the sender) at rank 0 and every inference worker after it, server by server: a server
whose model spans `n` GPUs (tensor x pipeline x data parallel) holds `n` consecutive ranks, starting at its
`rank_offset`. Neither engine can say over HTTP how many workers it runs, so the caller does.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence

from agentrl.errors import UserError


class NcclUnavailableError(UserError):
    """This process cannot send weights over NCCL: no CUDA GPU, or the engine's package is missing."""


def rank_layout(workers_per_server: int | Sequence[int], servers: int) -> tuple[int, list[int]]:
    """The group's world size and each server's `rank_offset`, with the trainer at rank 0.

    Args:
        workers_per_server: GPUs (workers) of each server, or one count for all of them.
        servers: How many servers take part.

    Raises:
        ValueError: A count is below 1, or the counts do not name every server.
    """
    counts = [workers_per_server] * servers if isinstance(workers_per_server, int) else list(workers_per_server)
    if len(counts) != servers:
        raise ValueError(f"workers_per_server names {len(counts)} servers, but there are {servers}")
    if servers < 1 or any(count < 1 for count in counts):
        raise ValueError(f"every server needs at least one worker (got {counts} for {servers} servers)")
    offsets = [1 + sum(counts[:i]) for i in range(servers)]
    return 1 + sum(counts), offsets


def require_cuda(what: str, instead: str) -> None:
    """Raise `NcclUnavailableError` unless torch sees a CUDA GPU here; `instead` says what to use on CPU."""
    import torch

    if not torch.cuda.is_available():
        raise NcclUnavailableError(
            f"{what} sends weights over NCCL and needs a CUDA GPU in the trainer process, but torch sees none "
            f"(torch {torch.__version__}); {instead}"
        )


def require_package(package: str, what: str, install: str) -> None:
    """Raise `NcclUnavailableError` unless `package` is importable here; `install` says how to get it."""
    if importlib.util.find_spec(package) is None:
        raise NcclUnavailableError(f"{what} needs the {package} package in the trainer process: {install}")
