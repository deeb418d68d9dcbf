"""Token-in/token-out async client for rollout servers (our `hf` server, vLLM, SGLang).

`generate()` sends prompt token ids to `/v1/completions` with `return_token_ids` and `logprobs=1` (or to the
backend's own generate route: vLLM's, SGLang's `/generate`) and takes the generated token ids from the response:
generated text is never re-tokenized. Every request goes through a `Router` (least in-flight, sticky sessions);
connection errors, timeouts and 5xx answers are retried with exponential backoff, on another replica when one is
live; 4xx answers are raised at once.

The transport is aiohttp rather than httpx: httpcore's pool does O(connections^2) work per request, which made
300 concurrent requests take ~30x longer than aiohttp's in a side-by-side run on this machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import Any, Literal, Self

import aiohttp

from agentrl.config.schema import RolloutConfig
from agentrl.deadline import AdaptiveDeadline
from agentrl.rollout.completions import (
    TokenOutput,
    as_version,
    completion_body,
    parse_completion,
)
from agentrl.rollout.errors import (
    NoHealthyReplicaError,
    ProtocolError,
    RetryableError,
    ServerRequestError,
    StreamBrokenError,
    error_message,
)
from agentrl.rollout.protocol import SamplingParams
from agentrl.rollout.router import Router
from agentrl.rollout.sglang_generate import GENERATE_PATH as SGLANG_GENERATE_PATH
from agentrl.rollout.sglang_generate import StreamChunks, generate_request, parse_generate_response
from agentrl.rollout.stall import StallGuard
from agentrl.rollout.streaming import CompletionStream, SinkFailed, TokenSink
from agentrl.rollout.vllm_generate import (
    GENERATE_PATH,
    as_completion,
    check_spans,
    generate_body,
    is_disabled,
)

logger = logging.getLogger(__name__)

Attempt = Callable[[str, str, dict[str, Any]], Awaitable[Any]]
"""One try of a request at one replica: (replica url, path, body) -> the parsed answer."""

Api = Literal["completions", "vllm_generate", "sglang_generate"]
"""The generation route a client speaks (see `LLMClient`)."""
_BACKEND_APIS: dict[str, Api] = {"vllm": "vllm_generate", "sglang": "sglang_generate"}

_DEAD_ERRORS = (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError)
"""Transport errors meaning nobody listens: the replica is marked dead."""


class LLMClient:
    """Async client over one or more rollout server replicas.

    Args:
        servers: A `Router`, or replica base URLs (`http://host:port`), or one URL.
        model: Model name sent in requests; empty sends none (vLLM then uses its served model).
        adapter: The `hf` server's LoRA adapter that generates (sent as `lora_adapter`; see `self.adapter`).
        timeout: Seconds one request may take (generation included).
        connect_timeout: Seconds to open a connection.
        max_retries: Retries after the first attempt, for connection errors, timeouts and 5xx.
        backoff_base: First backoff delay in seconds; doubles each retry, with jitter.
        backoff_max: Cap of one backoff delay.
        max_connections: Most open connections (0: no limit); keep it above the expected concurrency.
        health_interval: Seconds between health probes of dead replicas (when the client builds the router).
        health_timeout: Seconds one `GET /health` probe may take.
        stall_timeout: Seconds a replica may hold requests open without completing any before it is cut off
            (`agentrl.rollout.stall`: marked dead, its requests retried elsewhere); None: derived from the
            requests' own durations (5x the slowest so far, at least 60 s; `timeout` before the first completes).
        api: `completions` (`/v1/completions`: agentrl's `hf` server), `vllm_generate` (vLLM's
            `/inference/v1/generate`, whose answers label each token with the weights that sampled it; a vLLM
            started without `--enable-scale-out` is then reached by `/v1/completions`, with unknown versions) or
            `sglang_generate` (SGLang's `/generate`, whose answers and stream chunks carry its weight version;
            its `/v1/completions` streams carry none).
    """

    def __init__(
        self,
        servers: Router | Sequence[str] | str,
        *,
        model: str = "",
        timeout: float = 600.0,
        connect_timeout: float = 10.0,
        max_retries: int = 5,
        backoff_base: float = 0.5,
        backoff_max: float = 8.0,
        max_connections: int = 8192,
        health_interval: float = 5.0,
        health_timeout: float = 2.0,
        api: Api = "completions",
        adapter: str | None = None,
        stall_timeout: float | None = None,
    ) -> None:
        if isinstance(servers, Router):
            self.router, self._owns_router = servers, False
        else:
            urls = [servers] if isinstance(servers, str) else list(servers)
            self.router, self._owns_router = Router(urls, health_interval=health_interval), True
        if self.router.probe is None:
            self.router.probe = self._probe
        self.model = model
        self.adapter = adapter
        """The `hf` server's LoRA adapter that generates (`rollout.lora_adapter`): a replica without it loaded
        answers 503, so it is routed around until the weight sync catches it up."""
        self.api = api
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.health_timeout = health_timeout
        self.max_connections = max_connections
        self._timeout = aiohttp.ClientTimeout(total=timeout, sock_connect=connect_timeout)
        self._http: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        deadline = AdaptiveDeadline(explicit=stall_timeout, first=timeout, floor=60.0, factor=5.0)
        self.stall_guard = StallGuard(deadline, on_stall=self.router.mark_stalled)
        self._stall_watch: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Self:
        self._start()
        return self

    def _start(self) -> None:
        """The router's health loop and the stall watch (idempotent; needs a running event loop)."""
        self.router.start()
        if self._stall_watch is None or self._stall_watch.done():
            self._stall_watch = asyncio.get_running_loop().create_task(
                self.stall_guard.watch(), name="agentrl-stall-watch"
            )

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Closes the connection pool, and stops the health loop of a router this client built."""
        if self._owns_router:
            await self.router.stop()
        watch, self._stall_watch = self._stall_watch, None
        if watch is not None and not watch.done():
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watch
        http, self._http = self._http, None
        if http is not None and not http.closed:
            await http.close()

    async def generate(
        self, prompt_ids: list[int], sampling: SamplingParams | None = None, session_id: str | None = None
    ) -> TokenOutput:
        """Generates one completion from prompt token ids.

        Args:
            prompt_ids: The full prompt as token ids (chat template already applied).
            sampling: Sampling parameters; defaults to `SamplingParams()`.
            session_id: Sticky routing key (e.g. the trajectory id), for prefix-cache hits.

        Returns:
            The generated token ids and their logprobs, exactly as the server returned them.

        Raises:
            ServerRequestError: The server rejected the request (4xx), or kept failing with 5xx.
            ServerUnavailableError: No replica answered after every retry.
            ProtocolError: The server does not return token ids or logprobs.
        """
        sampling = sampling or SamplingParams()
        if self.api == "sglang_generate":
            url, data = await self._post(SGLANG_GENERATE_PATH, generate_request(prompt_ids, sampling), session_id)
            return parse_generate_response(data, url)
        if self.api == "vllm_generate":
            try:
                url, data = await self._post(GENERATE_PATH, generate_body(prompt_ids, sampling, self.model), session_id)
                return parse_completion(url, as_completion(data, url))
            except ServerRequestError as e:
                self._unless_route_off(e)
        url, data = await self._post("/v1/completions", self._completion_body(prompt_ids, sampling), session_id)
        return parse_completion(url, data)

    def _completion_body(self, prompt_ids: list[int], sampling: SamplingParams) -> dict[str, Any]:
        body = completion_body(prompt_ids, sampling, self.model)
        return {**body, "lora_adapter": self.adapter} if self.adapter else body

    def _unless_route_off(self, error: ServerRequestError) -> None:
        """Re-raise `error` unless it says vLLM's generate route is off; then use `/v1/completions` from now on."""
        if not is_disabled(error.status_code, error.server_message):
            raise error
        self.api = "completions"
        logger.warning(
            "vLLM at %s has no %s (%s): its tokens' versions are unknown (rollout/version_known < 1); start vLLM "
            "with --enable-scale-out, as agentrl's vllm backend does",
            error.url,
            GENERATE_PATH,
            error.status_code,
        )

    async def generate_stream(
        self,
        prompt_ids: list[int],
        sampling: SamplingParams | None = None,
        session_id: str | None = None,
        *,
        on_tokens: TokenSink,
    ) -> TokenOutput:
        """Generates as `generate` does, streaming: `on_tokens` gets the new token ids of each chunk as it arrives.

        A failure before the first token is retried as `generate` retries; after it, the tokens are out, so the
        call fails at once (`StreamBrokenError`).

        Raises:
            ServerRequestError, ServerUnavailableError, ProtocolError: as `generate`.
            StreamBrokenError: the stream stopped after tokens had been handed to `on_tokens`.
        """
        sampling = sampling or SamplingParams()

        async def try_once(url: str, path: str, body: dict[str, Any]) -> TokenOutput:
            return await self._stream_attempt(url, path, body, on_tokens)

        if self.api == "sglang_generate":
            body = generate_request(prompt_ids, sampling, stream=True)
            return (await self._post(SGLANG_GENERATE_PATH, body, session_id, try_once))[1]
        if self.api == "vllm_generate":
            try:
                body = generate_body(prompt_ids, sampling, self.model, stream=True)
                return (await self._post(GENERATE_PATH, body, session_id, try_once))[1]
            except ServerRequestError as e:
                self._unless_route_off(e)
        body = {**self._completion_body(prompt_ids, sampling), "stream": True}
        return (await self._post("/v1/completions", body, session_id, try_once))[1]

    async def chat(self, messages: Sequence[dict[str, Any]], session_id: str | None = None, **sampling: Any) -> str:
        """Convenience text chat through `/v1/chat/completions` (for tools and judges, not for training).

        Args:
            messages: OpenAI-shaped messages.
            session_id: Sticky routing key.
            **sampling: Extra request fields (`temperature`, `max_tokens`, `seed`, ...).

        Returns:
            The assistant message content.
        """
        body: dict[str, Any] = {"messages": list(messages), **sampling}
        if self.model:
            body.setdefault("model", self.model)
        url, data = await self._post("/v1/chat/completions", body, session_id)
        try:
            return data["choices"][0]["message"]["content"] or ""
        except (KeyError, IndexError, TypeError) as e:
            raise ProtocolError(f"rollout server {url} sent a malformed chat completion: {data!r:.300}") from e

    # ---- transport --------------------------------------------------------------------------------------

    async def _post(
        self, path: str, body: dict[str, Any], session_id: str | None, try_once: Attempt | None = None
    ) -> tuple[str, Any]:
        try_once = try_once or self._attempt
        self._start()
        tried: set[str] = set()
        last: RetryableError | None = None
        for attempt in range(self.max_retries + 1):
            if last is not None:
                self.router.note_retry()
            url = await self._acquire(session_id, tried)
            if url is None:
                await self._backoff(attempt)
                continue
            try:
                return url, await try_once(url, path, body)
            except RetryableError as e:
                last = e
            finally:
                self.router.release(url)
            tried.add(url)
            if not (last.switch_fast and (attempt == 0 or set(self.router.healthy) - tried)):
                await self._backoff(attempt)
        last = last or RetryableError(str(self.router.replicas), "no live replica")
        raise last.final_error(self.max_retries, self.router.replicas)

    async def _acquire(self, session_id: str | None, tried: set[str]) -> str | None:
        """A replica for the next attempt; when none is live, probes the dead ones first. None if none."""
        for _ in range(2):
            try:
                return self.router.acquire(session_id, avoid=tried)
            except NoHealthyReplicaError:
                if not await self.router.check_health():
                    return None
        return None

    def _session(self) -> aiohttp.ClientSession:
        """The connection pool, made on first use inside the running event loop (and per loop)."""
        loop = asyncio.get_running_loop()
        if self._http is None or self._http.closed or self._loop is not loop:
            self._loop = loop
            # idle connections close before uvicorn's (and vLLM's) 5 s keep-alive does, to avoid reuse races
            connector = aiohttp.TCPConnector(limit=self.max_connections, keepalive_timeout=4.0)
            self._http = aiohttp.ClientSession(connector=connector, timeout=self._timeout)
        return self._http

    async def _attempt(self, url: str, path: str, body: dict[str, Any]) -> Any:
        try:
            async with self.stall_guard.request(url), self._session().post(url + path, json=body) as response:
                status, raw, reason = response.status, await response.read(), response.reason or ""
        except (aiohttp.ClientError, TimeoutError) as e:
            raise self._transport_error(url, e) from e
        _raise_for_status(url, status, raw, reason)
        try:
            return json.loads(raw)
        except ValueError as e:
            raise ProtocolError(f"rollout server {url} answered with invalid JSON: {raw[:300]!r}") from e

    async def _stream_attempt(self, url: str, path: str, body: dict[str, Any], on_tokens: TokenSink) -> TokenOutput:
        stream = CompletionStream(url, on_tokens, _chunk_reader(path))
        try:
            async with self._session().post(url + path, json=body) as response:
                if response.status >= 400:
                    _raise_for_status(url, response.status, await response.read(), response.reason or "")
                await stream.feed(response.content)
        except SinkFailed as e:
            raise e.error from None
        except (aiohttp.ClientError, TimeoutError) as e:
            if not stream.token_ids:
                raise self._transport_error(url, e) from e
            raise StreamBrokenError(url, len(stream.token_ids), f"{type(e).__name__}: {e}") from e
        if not stream.done:
            raise StreamBrokenError(url, len(stream.token_ids), "the body ended before `data: [DONE]`")
        version = as_version(stream.policy_version)
        if stream.version_spans is not None:
            check_spans(stream.version_spans, len(stream.token_ids), url)
        return TokenOutput(
            token_ids=stream.token_ids,
            logprobs=stream.logprobs,
            finish_reason=stream.finish_reason,
            policy_version=stream.version_spans[-1][2] if stream.version_spans else version,
            version_spans=stream.version_spans,
            prompt_token_ids=stream.prompt_token_ids,
            replica=url,
        )

    def _transport_error(self, url: str, e: BaseException) -> RetryableError:
        """The retryable error of a failed connection or timeout (a replica nobody listens on is marked dead)."""
        if isinstance(e, _DEAD_ERRORS):
            self.router.mark_dead(url)
            return RetryableError(url, f"{type(e).__name__}: {e}", switch_fast=True)
        if isinstance(e, TimeoutError) and self.stall_guard.was_cut(url):
            limit = self.stall_guard.deadline.seconds()
            return RetryableError(url, f"the replica stalled (nothing completed in {limit:.0f} s)", switch_fast=True)
        if isinstance(e, TimeoutError):
            return RetryableError(url, f"timed out ({type(e).__name__})")
        # connection dropped mid-request (e.g. the server died)
        return RetryableError(url, f"{type(e).__name__}: {e}", switch_fast=True)

    async def _backoff(self, attempt: int) -> None:
        if attempt >= self.max_retries:
            return
        delay = min(self.backoff_max, self.backoff_base * 2**attempt)
        await asyncio.sleep(delay * (0.5 + random.random() / 2))

    async def _probe(self, url: str) -> bool:
        timeout = aiohttp.ClientTimeout(total=self.health_timeout)
        try:
            async with self._session().get(url + "/health", timeout=timeout) as response:
                return response.status == 200
        except (aiohttp.ClientError, TimeoutError):
            return False


def rollout_client(urls: list[str], rollout: RolloutConfig) -> LLMClient:
    """A client of the servers at `urls` with the settings of `rollout` (timeout, health checks, the backend's
    generation route; a LoRA adapter's requests name it as their model)."""
    return LLMClient(
        urls,
        timeout=rollout.request_timeout_s,
        stall_timeout=rollout.stall_timeout_s,
        health_interval=rollout.health_check_interval_s,
        api=client_api(rollout.backend),
        model=rollout.lora_adapter or "",
        adapter=rollout.lora_adapter,
    )


def client_api(backend: str) -> Api:
    """The generation route for a `rollout.backend`: vLLM's generate route (versions per token), SGLang's
    `/generate` (its version on every stream chunk), else `/v1/completions`."""
    return _BACKEND_APIS.get(backend, "completions")


def _chunk_reader(path: str) -> Callable[[Any, str], Any] | None:
    """What reads a stream chunk of the route at `path` in `/v1/completions` shape (None: it is in that shape)."""
    if path == GENERATE_PATH:
        return as_completion
    return StreamChunks() if path == SGLANG_GENERATE_PATH else None


def _raise_for_status(url: str, status: int, raw: bytes, reason: str) -> None:
    """Raise for an error answer: a 5xx is retryable, a 4xx is the request's own fault."""
    if status < 400:
        return
    message = error_message(raw.decode(errors="replace"), reason)
    if status >= 500:
        raise RetryableError(url, message, status=status)
    raise ServerRequestError(url, status, message)
