"""Errors raised by the rollout client and router."""

from __future__ import annotations

import json
from collections.abc import Sequence

from agentrl.errors import InfrastructureError


class RolloutError(InfrastructureError, RuntimeError):
    """Base class of every rollout client error (user-facing: the CLI prints the message)."""


class ServerUnavailableError(RolloutError):
    """No rollout server replica answered, after every retry."""

    def __init__(self, urls: Sequence[str], last_error: str | None = None) -> None:
        self.urls = list(urls)
        self.last_error = last_error
        message = f"no rollout server answered at {self.urls}; is it running? start one with `agentrl serve`"
        if last_error:
            message += f" (last error: {last_error})"
        super().__init__(message)


class NoHealthyReplicaError(RolloutError):
    """The router has no live replica to offer right now (the client retries, then raises
    `ServerUnavailableError`)."""


class ServerRequestError(RolloutError):
    """A server answered with an error status (a 4xx, or a 5xx that outlived the retries)."""

    def __init__(self, url: str, status_code: int, message: str) -> None:
        self.url = url
        self.status_code = status_code
        self.server_message = message
        super().__init__(f"rollout server {url} answered HTTP {status_code}: {message}")


class StreamBrokenError(RolloutError):
    """A streamed generation stopped after some of its tokens had been handed on (it cannot be retried)."""

    def __init__(self, url: str, tokens: int, reason: str) -> None:
        super().__init__(f"rollout server {url} broke off a streamed generation after {tokens} tokens: {reason}")
        self.url, self.tokens = url, tokens


class ProtocolError(RolloutError):
    """A server answered 200 but its response lacks what the token-in/token-out contract needs."""


class RetryableError(RolloutError):
    """One attempt failed in a way worth another try (internal to the client's retry loop).

    Args:
        url: The replica that failed.
        message: What went wrong.
        status: The HTTP status for a 5xx answer; None for transport errors and timeouts.
        switch_fast: Retry at once on another live replica, without backoff.
    """

    def __init__(self, url: str, message: str, *, status: int | None = None, switch_fast: bool = False) -> None:
        super().__init__(f"{url}: {message}")
        self.url, self.message, self.status, self.switch_fast = url, message, status, switch_fast

    def final_error(self, retries: int, urls: list[str]) -> RolloutError:
        """The error to raise once retries are spent."""
        if self.status is not None:
            return ServerRequestError(self.url, self.status, f"{self.message} (after {retries} retries)")
        return ServerUnavailableError(urls, str(self))


def error_message(body: str, reason: str = "") -> str:
    """The human message of an error response body (OpenAI, vLLM or FastAPI shape), else its raw text."""
    try:
        data = json.loads(body)
    except ValueError:
        return body.strip()[:2000] or reason
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        for key in ("message", "detail", "error"):
            if data.get(key):
                return str(data[key])
    return str(data)[:2000]
