"""FAKE OpenAI-compatible completion server, for unit tests of the client and router ONLY.

It speaks just enough HTTP/1.1 (keep-alive, JSON bodies with Content-Length) on asyncio streams, in its own
thread and event loop, so that tests control it precisely: `kill()` drops the listener and aborts every open
connection mid-request, as a crashed process would; `restart()` listens again on the same port. It generates
deterministic tokens (`fake_token_ids`) with made-up logprobs (`fake_logprobs`); nothing here is a model.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from http import HTTPStatus
from types import TracebackType
from typing import Any, Self

from agentrl.rollout.protocol import error_payload

FAKE_VOCAB = 1000
FAKE_EOS = 0


def fake_token_ids(prompt_ids: list[int], max_tokens: int, seed: int | None = None) -> list[int]:
    """The tokens the fake server generates: a deterministic function of the prompt and seed."""
    start = (sum(prompt_ids) + len(prompt_ids) + 7 * (seed or 0)) % FAKE_VOCAB
    return [1 + (start + 13 * i) % (FAKE_VOCAB - 1) for i in range(max_tokens)]


def fake_logprobs(token_ids: list[int]) -> list[float]:
    """The logprobs the fake server reports for `token_ids`."""
    return [-((t % 97) + 1) / 64.0 for t in token_ids]


@dataclass
class _Failures:
    remaining: int = 0
    status: int = 503
    message: str = "fake server overloaded"


class FakeCompletionServer:
    """A FAKE rollout server on localhost, for unit tests only.

    Args:
        latency: Seconds each completion takes.
        policy_version: Top-level `policy_version` in responses (None leaves it out, as vLLM does).
        return_token_ids: False imitates a server too old to return token ids.
        max_model_len: Prompt plus `max_tokens` beyond this answers HTTP 400, as vLLM does.
    """

    def __init__(
        self,
        *,
        latency: float = 0.0,
        policy_version: int | None = None,
        return_token_ids: bool = True,
        max_model_len: int = 4096,
    ) -> None:
        self.latency = latency
        self.policy_version = policy_version
        self.return_token_ids = return_token_ids
        self.max_model_len = max_model_len
        self.healthy = True
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.health_checks = 0
        self.port = 0
        self._failures = _Failures()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fake-llm-server", daemon=True)
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        """Base URL (`http://127.0.0.1:PORT`)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def completions(self) -> int:
        """Number of `/v1/completions` and `/v1/chat/completions` requests received."""
        return len(self.requests)

    def fail_next(self, n: int, status: int = 503, message: str = "fake server overloaded") -> None:
        """Answers the next `n` completion requests with HTTP `status`."""
        self._failures = _Failures(n, status, message)

    # ---- lifecycle (called from the test's thread) ------------------------------------------------------

    def start(self) -> Self:
        """Starts listening (on a free port the first time, on the same port after `kill()`)."""
        if not self._thread.is_alive():
            self._thread.start()
        self._call(self._listen())
        return self

    def kill(self) -> None:
        """Stops listening and aborts every open connection, in-flight requests included (a crash)."""
        self._call(self._abort())

    def restart(self) -> None:
        """Listens again on the same port after `kill()`."""
        self._call(self._listen())

    def close(self) -> None:
        """Kills the server and ends its thread."""
        if self._thread.is_alive():
            self.kill()
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
        self._loop.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _call(self, coro: Any) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        return future.result(timeout=10)

    async def _listen(self) -> None:
        if self._server is not None:
            return
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _abort(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for writer in list(self._writers):
            writer.transport.abort()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.sleep(0)

    # ---- HTTP -------------------------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        self._writers.add(writer)
        try:
            while await self._one_request(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            self._handlers.discard(task)
            self._writers.discard(writer)
            writer.close()

    async def _one_request(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        line = await reader.readline()
        if not line.strip():
            return False
        method, path, _ = line.decode("latin-1").split(" ", 2)
        headers: dict[str, str] = {}
        while (header := await reader.readline()).strip():
            key, _, value = header.decode("latin-1").partition(":")
            headers[key.strip().lower()] = value.strip()
        raw = await reader.readexactly(int(headers.get("content-length", "0")))
        body = json.loads(raw) if raw else {}
        status, payload = await self._route(method, path.split("?")[0], body)
        if status == 200 and body.get("stream") is True:
            await self._stream(writer, payload)
            return False
        data = json.dumps(payload).encode()
        head = f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\nContent-Type: application/json\r\n"
        writer.write(f"{head}Content-Length: {len(data)}\r\n\r\n".encode() + data)
        await writer.drain()
        return headers.get("connection", "").lower() != "close"

    async def _stream(self, writer: asyncio.StreamWriter, payload: dict[str, Any]) -> None:
        """A completion as server-sent events, one token per chunk (then the connection closes)."""
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
        choice = payload["choices"][0]
        ids, logprobs = choice.get("token_ids") or [], (choice.get("logprobs") or {}).get("token_logprobs") or []
        for i, token in enumerate(ids):
            piece = {"index": 0, "text": f"t{token} ", "token_ids": [token], "finish_reason": None}
            piece["logprobs"] = {"token_logprobs": logprobs[i : i + 1]}
            writer.write(f"data: {json.dumps({**payload, 'choices': [piece]})}\n\n".encode())
            await writer.drain()
        last = {"index": 0, "text": "", "token_ids": [], "finish_reason": choice["finish_reason"]}
        writer.write(f"data: {json.dumps({**payload, 'choices': [last]})}\n\ndata: [DONE]\n\n".encode())
        await writer.drain()

    async def _route(self, method: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        if method == "GET" and path == "/health":
            self.health_checks += 1
            return (200, {}) if self.healthy else (503, error_payload("unhealthy", 503))
        if method == "GET" and path == "/v1/models":
            return 200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}]}
        if method == "POST" and path in ("/v1/completions", "/v1/chat/completions"):
            return await self._completion(path, body)
        return 404, error_payload(f"no route {method} {path}", 404, "NotFoundError")

    async def _completion(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        self.requests.append(body)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.latency)
            if self._failures.remaining > 0:
                self._failures.remaining -= 1
                return self._failures.status, error_payload(self._failures.message, self._failures.status)
            if path.endswith("/chat/completions"):
                return 200, self._chat(body)
            return self._text_completion(body)
        finally:
            self.in_flight -= 1

    def _text_completion(self, body: dict[str, Any]) -> tuple[int, Any]:
        prompt = body.get("prompt", [])
        if not isinstance(prompt, list):
            return 400, error_payload("the FAKE server only takes token-id prompts")
        max_tokens = int(body.get("max_tokens", 16))
        if len(prompt) + max_tokens > self.max_model_len:
            msg = (
                f"This model's maximum context length is {self.max_model_len} tokens. However, you "
                f"requested {len(prompt) + max_tokens} tokens ({len(prompt)} in the messages, "
                f"{max_tokens} in the completion)."
            )
            return 400, error_payload(msg)
        tokens, finish = self._generate(prompt, max_tokens, body)
        choice: dict[str, Any] = {"index": 0, "text": " ".join(f"t{t}" for t in tokens)}
        choice["finish_reason"] = finish
        if body.get("logprobs") is not None:
            choice["logprobs"] = {
                "tokens": [f"t{t}" for t in tokens],
                "token_logprobs": fake_logprobs(tokens),
            }
        if body.get("return_token_ids") and self.return_token_ids:
            choice.update(token_ids=tokens, prompt_token_ids=prompt)
        return 200, self._envelope("text_completion", choice, len(prompt), len(tokens))

    def _generate(self, prompt: list[int], max_tokens: int, body: dict[str, Any]) -> tuple[list[int], str]:
        tokens = fake_token_ids(prompt, max_tokens, body.get("seed"))
        for i, token in enumerate(tokens):
            if token in (body.get("stop_token_ids") or []):
                return tokens[: i + 1], "stop"
        return tokens, "length"

    def _chat(self, body: dict[str, Any]) -> dict[str, Any]:
        last = (body.get("messages") or [{}])[-1].get("content", "")
        message = {"role": "assistant", "content": f"fake reply to: {last}"}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        return self._envelope("chat.completion", choice, 0, 0)

    def _envelope(self, kind: str, choice: dict[str, Any], n_prompt: int, n_out: int) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": f"fake-{len(self.requests)}",
            "object": kind,
            "created": int(time.time()),
        }
        usage = {"prompt_tokens": n_prompt, "completion_tokens": n_out, "total_tokens": n_prompt + n_out}
        out.update(model="fake-model", choices=[choice], usage=usage)
        if self.policy_version is not None:
            out["policy_version"] = self.policy_version
        return out


@contextlib.contextmanager
def fake_servers(n: int, **kwargs: Any) -> Iterator[list[FakeCompletionServer]]:
    """Starts `n` FAKE servers (same options) and closes them on exit."""
    servers = [FakeCompletionServer(**kwargs).start() for _ in range(n)]
    try:
        yield servers
    finally:
        for server in servers:
            server.close()
