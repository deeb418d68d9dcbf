"""The gateway's token: what an agent beyond this machine must send as its API key.

`agentrl gateway` opens a session at the first call to any session name and closes one on `POST /s/<name>/close`;
on a host other machines reach that would let anyone generate from the policy and write trajectories. So there it
starts only with a token (`AGENTRL_GATEWAY_TOKEN` in its environment), and every route then needs it as the
agent's API key: `Authorization: Bearer <token>` (OpenAI SDKs, Codex) or `x-api-key: <token>` (the anthropic SDK,
Claude Code). Set the agent's `OPENAI_API_KEY` / `ANTHROPIC_API_KEY` to the token. On loopback nothing changes
unless the variable is set.
"""

from __future__ import annotations

import hmac
import os

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from agentrl.errors import UserError
from agentrl.gateway.errors import error_response
from agentrl.weights_token import bearer_matches, is_loopback

GATEWAY_TOKEN_ENV = "AGENTRL_GATEWAY_TOKEN"
"""The secret agents send as their API key to a gateway that other machines reach."""


def gateway_token(host: str, token: str | None = None) -> str | None:
    """The token a gateway on `host` takes: `token`, else `AGENTRL_GATEWAY_TOKEN`.

    Raises:
        UserError: `host` is reachable from other machines and there is no token.
    """
    token = token or os.environ.get(GATEWAY_TOKEN_ENV) or None
    if token is None and not is_loopback(host):
        raise UserError(
            f"gateway.host={host} lets any machine that reaches it open sessions on the policy and close them: set "
            f"{GATEWAY_TOKEN_ENV} to a secret, and give it to the agents as their API key (OPENAI_API_KEY or "
            "ANTHROPIC_API_KEY: they send it as `Authorization: Bearer` or `x-api-key`), or serve on 127.0.0.1"
        )
    return token


def has_token(request: web.BaseRequest, token: str) -> bool:
    """Whether `request` carries `token` as `Authorization: Bearer` or `x-api-key` (compared in constant time)."""
    if bearer_matches(request.headers.get("authorization"), token):
        return True
    return hmac.compare_digest(request.headers.get("x-api-key", "").encode(), token.encode())


def token_guard(token: str) -> Middleware:
    """aiohttp middleware: every request without `token` as its API key is answered 401."""

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        if has_token(request, token):
            return await handler(request)
        message = "this gateway takes calls only with its token as the API key (Authorization: Bearer, or x-api-key)"
        return error_response(401, message, "AuthenticationError", "invalid_api_key")

    return guard
