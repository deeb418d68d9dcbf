"""`Gateway`: an OpenAI-compatible endpoint in front of the run's rollout servers, one session per trajectory."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from types import TracebackType
from typing import Any, Self

from aiohttp import web

from agentrl.gateway.app import build_app
from agentrl.gateway.auth import gateway_token
from agentrl.gateway.recorder import SessionRecorder
from agentrl.gateway.session import GatewaySession, SessionLimits
from agentrl.loops.protocols import TokenGenerator, Tokenizer
from agentrl.rollout.protocol import SamplingParams
from agentrl.tools.parsers import ToolCallParser, get_parser

SHUTDOWN_TIMEOUT_S = 5.0
"""How long `stop` lets calls in flight finish before cancelling them."""


class Gateway:
    """Serves `/s/<session>/v1/chat/completions` for agents that only know "an OpenAI-compatible endpoint".

    Start it inside the event loop of the rollout client (`async with Gateway(...) as gateway`). Each trajectory
    opens a session and gives its agent `session.base_url`; the session records every call token-exactly
    (`session.recorder`), routes it sticky to one replica and enforces the trajectory's budgets.

    Args:
        llm: the rollout client (router, sticky sessions, policy versions); None when every session has an
            `upstream` (`agentrl.gateway.upstream`: another model answers, the policy is never asked).
        tokenizer: the policy's tokenizer (its chat template renders the prompts).
        model_name: the model id agents see (`/v1/models`); any name in requests is accepted.
        tool_parser: the format tool calls are parsed from (`agent.tool_parser`).
        host: interface to bind; 127.0.0.1 unless agents run on other hosts.
        port: port to bind; 0 picks a free one.
        on_demand: open a session at the first call to an unknown session name (with `session_options`), and
            serve `POST /s/<name>/close`; for serving a policy to agents that were given a URL by hand
            (`agentrl gateway`). Off for training, where only the URLs handed out are valid.
        on_close: called with each session closed (e.g. to save its trajectory).
        session_options: `open_session` arguments of on-demand sessions.
        unix_socket: also serve on this unix socket (created world-connectable), for agents in containers that
            have no network: the folder holding it is mounted into them, and `agentrl.harnesses.bridge` forwards a
            port on their loopback to it.
        token: the API key every call needs (`agentrl.gateway.auth`); default `AGENTRL_GATEWAY_TOKEN`. Sessions
            opened on demand on a `host` other machines reach need one (`UserError` without).
    """

    def __init__(
        self,
        llm: TokenGenerator | None,
        tokenizer: Tokenizer,
        *,
        model_name: str = "policy",
        tool_parser: str | ToolCallParser = "hermes",
        host: str = "127.0.0.1",
        port: int = 0,
        on_demand: bool = False,
        on_close: Callable[[GatewaySession], None] | None = None,
        session_options: dict[str, Any] | None = None,
        unix_socket: str | None = None,
        token: str | None = None,
    ) -> None:
        self.token = gateway_token(host, token) if on_demand else token
        self.llm, self.tokenizer, self.model_name = llm, tokenizer, model_name
        self.parser = get_parser(tool_parser)
        self.host, self.port = host, port
        self.on_demand, self.on_close = on_demand, on_close
        self.session_options = session_options or {}
        self.unix_socket = unix_socket
        self.sessions: dict[str, GatewaySession] = {}
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        """`http://host:port` once started."""
        if self._runner is None:
            raise RuntimeError("the gateway is not started: use `async with Gateway(...)` or `await start()`")
        return f"http://{self.host}:{self.port}"

    async def start(self) -> None:
        """Bind and serve (in the current event loop)."""
        lookup = self._lookup if self.on_demand else self.sessions.get
        close = self._close_by_id if self.on_demand else None
        app = build_app(lookup, lambda: self.llm, self.model_name, close, self.token)
        # handler_cancellation: a call whose agent went away (cancelled, timed out) stops generating at once
        self._runner = web.AppRunner(
            app, access_log=None, shutdown_timeout=SHUTDOWN_TIMEOUT_S, handler_cancellation=True
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        if self.unix_socket is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.unix_socket)  # a stopped gateway's
            await web.UnixSite(self._runner, self.unix_socket).start()
            os.chmod(self.unix_socket, 0o666)  # the containers' user is not ours

    async def stop(self) -> None:
        """Stop serving, then close the open sessions (and hand each to `on_close`): calls still in flight end
        before the sessions are handed over, so a saved trajectory never changes afterwards."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        for session in list(self.sessions.values()):
            self.close_session(session)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    def open_session(
        self,
        trajectory_id: str = "",
        sampling: SamplingParams | None = None,
        limits: SessionLimits | None = None,
        session_id: str | None = None,
        **options: Any,
    ) -> GatewaySession:
        """A new session: give its agent `session.base_url` (an unguessable URL that sees only this session).

        Args:
            trajectory_id: id of the session's first step sample.
            sampling: the run's sampling settings.
            limits: the trajectory's budgets.
            session_id: the id in its URL (default: an unguessable one).
            **options: `honour_request_sampling`, `resume_aborted` (see `GatewaySession`).
        """
        recorder = SessionRecorder(self.tokenizer, self.parser, trajectory_id)
        session = GatewaySession(recorder, sampling or SamplingParams(), limits or SessionLimits(), **options)
        if session_id is not None:
            session.id = session_id
        session.base_url = f"{self.url}/s/{session.id}/v1"
        self.sessions[session.id] = session
        return session

    def close_session(self, session: GatewaySession) -> GatewaySession:
        """End `session`: its URL answers 404 from now on, and a call still generating is refused rather than
        recorded; returns it with everything it recorded."""
        session.closed = True
        if self.sessions.pop(session.id, None) is not None and self.on_close is not None:
            self.on_close(session)
        return session

    def _lookup(self, session_id: str) -> GatewaySession:
        session = self.sessions.get(session_id)
        if session is None:
            session = self.open_session(session_id, session_id=session_id, **self.session_options)
        return session

    def _close_by_id(self, session_id: str) -> GatewaySession | None:
        session = self.sessions.get(session_id)
        return None if session is None else self.close_session(session)
