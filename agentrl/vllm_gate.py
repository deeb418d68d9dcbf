"""agentrl's gate in front of vLLM's routes: everything but generation and health needs the weights token.

agentrl starts vLLM with `VLLM_SERVER_DEV_MODE=1`, which mounts `/collective_rpc` (any worker method, the weight
loader included, with a path on the host), `/pause`, `/resume`, `/update_weight_version` and more. vLLM's own
`--api-key` does not cover them: in 0.32.0 it guards only paths under `/v1`, `/v2`, `/inference` and `/cohere`
(`vllm/entrypoints/serve/middleware/authenticate.py`), in later versions every route, generation too. So on a
host that other machines reach, `VLLMServer.launch` adds this class with `--middleware
agentrl.vllm_gate.WeightsTokenGate` (vLLM 0.32.0 calls `app.add_middleware(WeightsTokenGate)`: `serve/middleware/
register.py`), whatever vLLM's version. It lets the routes in `OPEN_PATHS` through
and refuses every other one (401) without `Authorization: Bearer <AGENTRL_WEIGHTS_TOKEN>`: a route vLLM adds later
is guarded too. It runs inside vLLM's own environment and imports nothing beyond `agentrl.weights_token`.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from agentrl.weights_token import WEIGHTS_TOKEN_ENV, bearer_matches, env_token

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

OPEN_PATHS = frozenset(
    {
        # generation (agentrl's rollout client; nothing here changes weights or calls a worker method)
        "/v1/completions",
        "/v1/chat/completions",
        "/inference/v1/generate",
        "/v1/models",
        "/tokenize",
        "/detokenize",
        # health and read-only descriptions
        "/health",
        "/ping",
        "/version",
        "/load",
        "/metrics",
        "/openapi.json",
    }
)
"""Routes anyone who reaches the server may call; every other route needs the token."""

REFUSAL = (
    "this vLLM server takes weights and control calls only with its token: send `Authorization: Bearer <token>` "
    f"(agentrl's trainer sends {WEIGHTS_TOKEN_ENV} from its environment)"
)


class WeightsTokenGate:
    """ASGI middleware: routes outside `OPEN_PATHS` need `Authorization: Bearer <AGENTRL_WEIGHTS_TOKEN>`.

    Raises:
        RuntimeError: vLLM's environment has no token (the server would then refuse nothing; it does not start).
    """

    def __init__(self, app: App) -> None:
        token = env_token()
        if token is None:
            raise RuntimeError(f"agentrl.vllm_gate.WeightsTokenGate needs {WEIGHTS_TOKEN_ENV} in vLLM's environment")
        self.app, self.token = app, token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or self._allowed(scope):
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
        else:
            await _send_refusal(send)

    def _allowed(self, scope: Scope) -> bool:
        path = scope["path"].removeprefix(scope.get("root_path", "")) or "/"
        if path in OPEN_PATHS or scope.get("method") == "OPTIONS":
            return True
        return bearer_matches(_header(scope, b"authorization"), self.token)


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


async def _send_refusal(send: Send) -> None:
    body = json.dumps({"error": {"message": REFUSAL, "type": "Unauthorized", "code": 401}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 401, "headers": headers})
    await send({"type": "http.response.body", "body": body})
