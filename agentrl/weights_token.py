"""The weights token: the secret a rollout server reachable from other hosts takes weights and control calls with.

Every server agentrl starts on a host other machines can reach (`hf`, vLLM, SGLang) refuses weight pushes, worker
calls and pause / resume / abort without `Authorization: Bearer <token>`; the trainer sends the token from its
environment (`AGENTRL_WEIGHTS_TOKEN`) or the one the handle that started the server holds. On loopback nothing
changes unless the variable is set. This module is stdlib only: it also runs inside vLLM's own environment
(`agentrl.vllm_gate`).
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from collections.abc import Mapping

from agentrl.errors import UserError

WEIGHTS_TOKEN_ENV = "AGENTRL_WEIGHTS_TOKEN"
"""The secret a server reachable from other hosts takes weights with; the trainer sends its own."""


class MissingTokenError(UserError):
    """A server was asked to listen beyond this machine without a token to guard its weight routes."""


def is_loopback(host: str) -> bool:
    """Whether a server bound to `host` is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def env_token(env: Mapping[str, str] | None = None) -> str | None:
    """`AGENTRL_WEIGHTS_TOKEN` of `env` (default: this process's environment), None when unset or empty."""
    return (os.environ if env is None else env).get(WEIGHTS_TOKEN_ENV) or None


def token_for_host(host: str, token: str | None, server: str) -> str | None:
    """The token a `server` (`vLLM`, `SGLang`) bound to `host` is started with: `token`, else the environment's.

    Raises:
        MissingTokenError: `host` is reachable from other hosts and there is no token.
    """
    token = token or env_token()
    if token is None and not is_loopback(host):
        raise MissingTokenError(
            f"{server} on host {host} would let any machine that reaches it push weights and call its control "
            f"routes: set {WEIGHTS_TOKEN_ENV} to a secret in its environment and the trainer's (the trainer sends "
            "it), or serve on 127.0.0.1"
        )
    return token


def bearer_headers(token: str | None) -> dict[str, str]:
    """The `Authorization` header that carries `token` (else `AGENTRL_WEIGHTS_TOKEN`), if any."""
    token = token or env_token()
    return {"authorization": f"Bearer {token}"} if token else {}


def bearer_matches(authorization: str | None, token: str) -> bool:
    """Whether an `Authorization` header value is `Bearer <token>` (compared in constant time)."""
    scheme, _, given = (authorization or "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.encode(), token.encode())
