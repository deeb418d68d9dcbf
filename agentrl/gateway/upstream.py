"""The gateway's upstream mode (`gateway.upstream=URL`): each call an agent makes is answered by another model's
OpenAI-compatible chat completions endpoint (a hosted API, a server of another model family: a teacher that returns
no token ids of the student's), and recorded as the student would have written the reply, in its chat template
(`agentrl.gateway.turns`): the sessions the gateway saves are demonstrations for `trainer.objective=sft`.

Agents speak to the gateway as always (chat completions, the Messages API, Responses): their requests are already
translated to chat messages, which go upstream with the agent's tools and sampling. Its key comes from
`AGENTRL_UPSTREAM_API_KEY` (sent as `Authorization: Bearer`), never from the config.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import httpx

from agentrl.errors import UserError
from agentrl.rollout.errors import RolloutError

UPSTREAM_KEY_ENV = "AGENTRL_UPSTREAM_API_KEY"
FORWARDED = ("temperature", "top_p", "stop", "seed")
"""The agent's sampling fields sent upstream as they are (`max_tokens` is the session's cap)."""


class UpstreamError(RolloutError):
    """The upstream did not answer a call (its status and message): the agent gets a 502."""


@dataclass
class Upstream:
    """An OpenAI-compatible endpoint (`url` ends in `/v1`) and the model asked there (None: the agent's own)."""

    url: str
    model: str | None = None
    api_key: str | None = field(default_factory=lambda: os.environ.get(UPSTREAM_KEY_ENV) or None, repr=False)
    timeout_s: float = 600.0

    def __post_init__(self) -> None:
        self.url = self.url.rstrip("/")

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def check(self) -> None:
        """Refuse an upstream that does not answer `GET /models` (at start, before any agent calls).

        Raises:
            UserError: naming the upstream and what it answered.
        """
        try:
            answer = httpx.get(f"{self.url}/models", headers=self.headers, timeout=10.0)
        except httpx.HTTPError as exc:
            raise UserError(
                f"gateway.upstream={self.url} cannot be reached ({type(exc).__name__}: {exc}): give the base URL of "
                "a running OpenAI-compatible server, ending in /v1"
            ) from exc
        if answer.status_code != 200:
            raise UserError(
                f"gateway.upstream={self.url} answered GET /models with {answer.status_code}: {answer.text[:200]}; "
                f"check the URL, and its key in {UPSTREAM_KEY_ENV}"
            )

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, request: dict[str, Any],
        max_tokens: int,
    ) -> tuple[dict[str, Any], str]:  # fmt: skip
        """The upstream's reply to `messages` (its assistant message: content and tool calls) and finish reason."""
        body: dict[str, Any] = {
            "model": self.model or request.get("model") or "default",
            "messages": messages,
            "max_tokens": max_tokens,
            **{k: request[k] for k in FORWARDED if request.get(k) is not None},
        }
        if tools:
            body["tools"] = tools
            if request.get("tool_choice") is not None:
                body["tool_choice"] = request["tool_choice"]
        async with httpx.AsyncClient(timeout=self.timeout_s) as client:
            try:
                answer = await client.post(f"{self.url}/chat/completions", json=body, headers=self.headers)
            except httpx.HTTPError as exc:
                raise UpstreamError(f"the upstream {self.url} did not answer: {type(exc).__name__}: {exc}") from exc
        if answer.status_code != 200:
            raise UpstreamError(f"the upstream {self.url} answered {answer.status_code}: {answer.text[:500]}")
        choice = answer.json()["choices"][0]
        return choice["message"], str(choice.get("finish_reason") or "stop")
