"""Several trainable policies in one episode: which rollout client generates for which policy (`policies:`).

A run with `policies:` hands its loops a `PolicyClients` as `ctx.llm`; `ctx.generate(policy="guesser")` asks it for
that policy's client. Without a policy name the first policy generates, so a loop written for one policy runs
unchanged (every role is then played by that one policy: self-play with shared weights).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

from agentrl.config.policies import policy_config, policy_names
from agentrl.config.schema import AgentRLConfig
from agentrl.errors import UserError
from agentrl.loops.protocols import Generation, TokenGenerator
from agentrl.rollout.protocol import SamplingParams


class UnknownPolicyError(UserError):
    """A loop asked for a policy the run does not have."""


class PolicyClients:
    """The rollout client of each policy, by name; itself a `TokenGenerator` of the first (default) policy."""

    def __init__(self, clients: dict[str, TokenGenerator], frozen: set[str] | None = None):
        if not clients:
            raise ValueError("PolicyClients needs at least one policy's client")
        self.clients = dict(clients)
        self.default = next(iter(self.clients))
        self.frozen = set(frozen or ())
        """Policies that serve but never learn (`trainable: false`): their replies are context, not trained."""

    @property
    def names(self) -> list[str]:
        return list(self.clients)

    def client(self, policy: str | None) -> TokenGenerator:
        """The client of `policy` (None: the default policy)."""
        if policy is None:
            return self.clients[self.default]
        if policy not in self.clients:
            raise UnknownPolicyError(
                f"the loop generated as policy {policy!r}, which the run does not have; its policies are "
                f"{', '.join(self.clients)}. Name it under policies: or map the role to one of them."
            )
        return self.clients[policy]

    async def generate(
        self, prompt_ids: list[int], sampling: SamplingParams, session_id: str | None = None
    ) -> Generation:
        return await self.clients[self.default].generate(prompt_ids, sampling, session_id=session_id)


def learns(llm: TokenGenerator, policy: str | None) -> bool:
    """Whether replies of `policy` are trained on (False for a frozen policy: an opponent, a judge)."""
    return not isinstance(llm, PolicyClients) or (policy or llm.default) not in llm.frozen


def client_for(llm: TokenGenerator, policy: str | None) -> TokenGenerator:
    """The client that generates as `policy`: `PolicyClients.client` in a run with `policies:`; `llm` itself in a
    run of one policy, where a loop that names a policy is refused (the run has no policy of that name)."""
    if isinstance(llm, PolicyClients):
        return llm.client(policy)
    if policy is None:
        return llm
    raise UnknownPolicyError(
        f"the loop generated as policy {policy!r}, but the run has one policy; name each policy under policies: "
        "(see docs/concepts/policies.md) or generate without policy="
    )


@dataclasses.dataclass
class ServedPolicy:
    """One policy's servers as a run serves them: its config (`policy_config`), model, servers and client."""

    name: str
    cfg: AgentRLConfig
    model_path: str
    servers: list[Any]
    client: Any


@contextlib.asynccontextmanager
async def serve_policies(
    cfg: AgentRLConfig, trains: bool = False
) -> AsyncIterator[tuple[TokenGenerator, list[ServedPolicy]]]:
    """Start (or connect to) every policy's rollout servers, each with its client, and yield the loops' generator
    (the one policy's client, or a `PolicyClients` of all of them) with each policy's servers. `agentrl train`,
    `rollout`, `eval` and the gateway all serve their policies here; the servers started are stopped after. A LoRA
    adapter policy (`lora_of`) starts no server: its client asks its base's servers for the adapter, which only a
    training run (`trains`) loads into them."""
    from agentrl.models import resolve_model
    from agentrl.rollout.client import rollout_client
    from agentrl.rollout.serve import rollout_servers

    served: dict[str, ServedPolicy] = {}
    names = policy_names(cfg)
    if not trains:
        _refuse_adapters(cfg, names)
    adapters = [name for name in names if cfg.policies.get(name) and cfg.policies[name].lora_of]
    async with contextlib.AsyncExitStack() as stack:
        for name in [n for n in names if n not in adapters] + adapters:  # an adapter's base is served first
            own = policy_config(cfg, name)
            model_path = resolve_model(own.model)
            if name in adapters:
                servers = _adapter_servers(served[cfg.policies[name].lora_of].servers, own)  # type: ignore[index]
            else:
                servers = await stack.enter_async_context(rollout_servers(own, model_path))
                servers = _adapter_servers(servers, own) if own.rollout.lora_adapter else servers
            client = await stack.enter_async_context(rollout_client([s.url for s in servers], own.rollout))
            served[name] = ServedPolicy(name, own, model_path, servers, client)
        in_order = [served[name] for name in names]
        if not cfg.policies:
            yield in_order[0].client, in_order
        else:
            frozen = {name for name, policy in cfg.policies.items() if not policy.trainable}
            yield PolicyClients({p.name: p.client for p in in_order}, frozen), in_order


def _refuse_adapters(cfg: AgentRLConfig, names: list[str]) -> None:
    adapters = [name for name in names if policy_config(cfg, name).rollout.lora_adapter]
    if adapters:
        raise UserError(
            f"{', '.join(adapters)}: served as LoRA adapters (lora_of / rollout.lora_adapter), which only a training "
            "run loads into its servers; evaluate them during training (trainer.eval_every), or here serve them as "
            "models of their own"
        )


def _adapter_servers(base: list[Any], own: AgentRLConfig) -> list[Any]:
    """An adapter policy's handles on its base policy's `hf` servers (`policies.X.lora_of`)."""
    from agentrl.rollout.handles import AdapterServer

    assert own.rollout.lora_adapter is not None
    return [AdapterServer(server, own.rollout.lora_adapter, own.trainer.lora_alpha) for server in base]


__all__ = ["PolicyClients", "ServedPolicy", "UnknownPolicyError", "client_for", "learns", "serve_policies"]
