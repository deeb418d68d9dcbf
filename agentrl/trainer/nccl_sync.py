"""`rollout.weight_transfer=nccl`: the trainer broadcasts each push from its GPU to the vLLM or SGLang servers
over one NCCL group (vLLM's own weight-transfer engine, SGLang's `update_weights_from_distributed`), instead of
writing a file the servers load. GPU only, and not verified on a GPU yet (see the README)."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any, Literal

from agentrl.config.schema import AgentRLConfig
from agentrl.rollout.handles import RolloutServer
from agentrl.rollout.servers.process import free_port


def nccl_sender(servers: list[RolloutServer], cfg: AgentRLConfig) -> Any:
    """The initialised NCCL sender for the run's servers (all of `rollout.backend`), this process as rank 0."""
    address = socket.gethostbyname(socket.gethostname())
    if cfg.rollout.backend == "vllm":
        from agentrl.rollout.servers.vllm_nccl import VLLMNcclSender

        sender: Any = VLLMNcclSender(servers, timeout=cfg.rollout.request_timeout_s)  # type: ignore[arg-type]
    else:
        from agentrl.rollout.servers.sglang_nccl import SGLangNcclSender

        sender = SGLangNcclSender(servers)  # type: ignore[arg-type]
    sender.init(address, free_port(address))
    return sender


class NcclPush:
    """Adapts a sender to `WeightSync`: one broadcast reaches the live servers.

    An NCCL group cannot lose or gain a member (a dead rank hangs every collective), so when the servers a push
    goes to are not the group's, the group is closed and formed again over them (`make_sender`): a dead replica
    is left out, and one that came back joins.
    """

    def __init__(
        self,
        make_sender: Callable[[list[RolloutServer]], Any],
        servers: list[RolloutServer],
        in_flight: Literal["finish", "abort"],
    ) -> None:
        self.make_sender, self.in_flight = make_sender, in_flight
        self.members: list[str] | None = [s.url for s in servers]
        self.sender: Any = make_sender(list(servers))
        self.regroups = 0
        """Times the group was formed again over other servers."""

    def __call__(self, state: Any, version: int, servers: list[RolloutServer]) -> None:
        if [s.url for s in servers] != self.members:
            self.close()
            self.members = None  # no group until the new one forms (forming it may fail; the next push tries again)
            self.sender = self.make_sender(list(servers))
            self.members = [s.url for s in servers]
            self.regroups += 1
        self.sender.push(state, version, in_flight=self.in_flight)

    def close(self) -> None:
        close = getattr(self.sender, "close", None)
        if close is not None:
            close()
        self.sender = None
