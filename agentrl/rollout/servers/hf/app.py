"""The FastAPI app of the `hf` server: OpenAI-compatible generation, abort, health and weight updates."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, Field, ValidationError
from starlette.exceptions import HTTPException

from agentrl.rollout.protocol import WeightUpdateRequest, error_payload
from agentrl.rollout.servers.hf.engine import HFEngine
from agentrl.rollout.servers.hf.request import (
    AdapterNotLoadedError,
    EngineShutdownError,
    GenerationOutput,
    RequestError,
)
from agentrl.rollout.servers.hf.responses import chat_response, completion_response
from agentrl.rollout.servers.hf.schemas import AbortRequest, ChatCompletionRequest, HFCompletionRequest, PathProbe
from agentrl.rollout.servers.hf.streaming import completion_events
from agentrl.rollout.servers.hf.weights import WeightUpdateError, payload_weights_id, read_state_dict
from agentrl.weight_delta import DeltaBaseMismatchError, DeltaError

DISCONNECT_POLL_S = 0.5
FAULT_WEIGHTS_DELAY_ENV = "AGENTRL_FAULT_WEIGHTS_DELAY_S"
"""Fault injection for tests: seconds every weight update waits, read, before it is applied (a window in which a
test stops, kills or cuts off the server mid-push)."""


class ClientDisconnectedError(Exception):
    """The HTTP client went away before its completion was ready."""


def _error(message: str, code: int, type_: str = "BadRequestError") -> JSONResponse:
    return JSONResponse(error_payload(message, code, type_), status_code=code)


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _invalid_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        return _error(f"invalid request: {exc.errors()}", 400)

    @app.exception_handler(ValidationError)
    async def _invalid_params(_: Request, exc: ValidationError) -> JSONResponse:
        return _error(f"invalid request: {exc.errors(include_url=False)}", 400)

    @app.exception_handler(DeltaBaseMismatchError)
    async def _stale_base(_: Request, exc: DeltaBaseMismatchError) -> JSONResponse:
        return _error(str(exc), 409, "DeltaBaseMismatch")

    @app.exception_handler(RequestError)
    @app.exception_handler(WeightUpdateError)
    @app.exception_handler(DeltaError)
    async def _bad_request(_: Request, exc: ValueError) -> JSONResponse:
        return _error(str(exc), 400)

    @app.exception_handler(EngineShutdownError)
    @app.exception_handler(AdapterNotLoadedError)
    async def _unavailable(_: Request, exc: RuntimeError) -> JSONResponse:
        return _error(str(exc), 503, "ServiceUnavailableError")

    @app.exception_handler(ClientDisconnectedError)
    async def _gone(_: Request, exc: ClientDisconnectedError) -> JSONResponse:
        return _error("client disconnected; request aborted", 499, "ClientDisconnected")

    @app.exception_handler(HTTPException)
    async def _http(_: Request, exc: HTTPException) -> JSONResponse:
        return _error(str(exc.detail), exc.status_code, "HTTPError")

    @app.exception_handler(Exception)
    async def _internal(_: Request, exc: Exception) -> JSONResponse:
        return _error(f"internal error: {exc!r}", 500, "InternalServerError")


async def _until_done_or_disconnect(request: Request, work: Awaitable[GenerationOutput]) -> GenerationOutput:
    """Await `work`; if the client disconnects first, cancel it (which aborts the request)."""
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=DISCONNECT_POLL_S)
            if done:
                return task.result()
            if await request.is_disconnected():
                raise ClientDisconnectedError()
    finally:
        if not task.done():
            task.cancel()


def _check_supported(body: HFCompletionRequest | ChatCompletionRequest) -> None:
    if body.stream and isinstance(body, ChatCompletionRequest):
        raise RequestError("The hf server streams /v1/completions only; send `stream: false` to chat completions.")
    if body.n != 1:
        raise RequestError("The hf server returns one choice per request (n=1); send n separate requests.")


def create_app(engine: HFEngine, model_name: str, weights_token: str | None = None) -> FastAPI:
    """The HTTP app around a (possibly not yet started) engine; the engine starts and stops with the app. With
    `weights_token`, the routes that load weights require `Authorization: Bearer <weights_token>`."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        engine.start()
        yield
        await asyncio.to_thread(engine.shutdown)

    app = FastAPI(title="agentrl hf rollout server", lifespan=lifespan)
    fault_delay_s = float(os.environ.get(FAULT_WEIGHTS_DELAY_ENV) or 0)
    pending_updates = [0]  # weight updates received and not yet answered (`/health`)
    _install_error_handlers(app)
    tok = engine.tokenizer

    def adapter_of(body: HFCompletionRequest | ChatCompletionRequest) -> str | None:
        """The LoRA adapter of a request: its `lora_adapter` (which must be loaded: agentrl's own clients), else
        the adapter its `model` names (any other name: the base model, as before adapters, for outside clients)."""
        required = getattr(body, "lora_adapter", None)
        if required is not None:
            if not engine.serves_adapter(required):
                raise AdapterNotLoadedError(
                    f"LoRA adapter {required!r} is not loaded on this server yet; loaded: "
                    f"{sorted(engine.adapter_versions)} (the trainer's weight sync loads it)"
                )
            return required
        return body.model if body.model and engine.serves_adapter(body.model) else None

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {
            "status": "ok",
            "policy_version": engine.policy_version,
            "adapters": engine.adapter_versions,
            "running": engine.num_running,
            "weights_pending": pending_updates[0],
        }

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        card = {"object": "model", "created": int(time.time()), "owned_by": "agentrl"}
        base = {**card, "id": model_name, "max_model_len": engine.max_model_len}
        adapters = [{**card, "id": name, "parent": model_name} for name in engine.adapter_versions]
        return {"object": "list", "data": [base, *adapters]}

    @app.post("/v1/completions", response_model=None)
    async def completions(body: HFCompletionRequest, request: Request) -> dict[str, Any] | StreamingResponse:
        _check_supported(body)
        prompt = tok(body.prompt).input_ids if isinstance(body.prompt, str) else body.prompt
        if body.stream:
            options = {
                "request_id": body.request_id,
                "top_logprobs": body.logprobs or 0,
                "ignore_eos": body.ignore_eos,
                "adapter": adapter_of(body),
            }
            events = engine.stream(prompt, body.sampling(), **options)
            sse = completion_events(events, body, list(prompt), model_name, tok)
            return StreamingResponse(sse, media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
        work = engine.generate(
            prompt,
            body.sampling(),
            request_id=body.request_id,
            top_logprobs=body.logprobs or 0,
            ignore_eos=body.ignore_eos,
            adapter=adapter_of(body),
        )
        out = await _until_done_or_disconnect(request, work)
        return completion_response(out, body, model_name, tok)

    @app.post("/v1/chat/completions")
    async def chat(body: ChatCompletionRequest, request: Request) -> dict[str, Any]:
        _check_supported(body)
        prompt = _render_chat(tok, body)
        work = engine.generate(
            prompt,
            body.sampling(max(1, engine.max_model_len - len(prompt))),
            request_id=body.request_id,
            top_logprobs=body.top_logprobs if body.logprobs else 0,
            ignore_eos=body.ignore_eos,
            adapter=adapter_of(body),
        )
        out = await _until_done_or_disconnect(request, work)
        return chat_response(out, body, model_name, tok)

    @app.post("/v1/abort")
    async def abort(body: AbortRequest) -> dict[str, Any]:
        ids = body.request_id if isinstance(body.request_id, list) else [body.request_id]
        return {"aborted": sum(engine.abort(rid) for rid in ids)}

    def authorize(request: Request) -> None:
        if weights_token is not None and request.headers.get("authorization") != f"Bearer {weights_token}":
            raise HTTPException(
                401,
                "this server takes weights only with its token: send `Authorization: Bearer <token>` "
                "(the trainer sends AGENTRL_WEIGHTS_TOKEN from its environment)",
            )

    @app.post("/v1/weights/probe")
    async def probe_weights_path(body: PathProbe, request: Request) -> dict[str, Any]:
        """Whether this server reads the client's file at `path` with content `token` (a shared filesystem), so
        that weights can go by path instead of being uploaded."""
        authorize(request)
        try:
            readable = Path(body.path).read_text() == body.token
        except (OSError, UnicodeDecodeError):
            readable = False
        return {"readable": readable}

    @app.get("/v1/weights/version")
    async def weights_version(adapter: str | None = None) -> dict[str, Any]:
        """The version the base model serves, or LoRA `adapter`'s (404 when it is not loaded)."""
        if adapter is None:
            return {
                "policy_version": engine.policy_version,
                "weights_id": engine.weights_id,
                "dtype": engine.weights_dtype,
            }
        versions = engine.adapter_versions
        if adapter not in versions:
            raise HTTPException(404, f"adapter {adapter!r} is not loaded; loaded: {sorted(versions)}")
        return {"policy_version": versions[adapter], "adapter": adapter}

    @app.get("/v1/weights/digest")
    async def weights_digest() -> dict[str, Any]:
        """A hash of the base model's weights (`agentrl.weight_delta.weights_digest`), their version and id."""
        digest = await asyncio.to_thread(engine.weights_digest)
        return {"digest": digest, "policy_version": engine.policy_version, "weights_id": engine.weights_id}

    @app.post("/v1/weights")
    async def update_weights(request: Request) -> dict[str, Any]:
        authorize(request)
        pending_updates[0] += 1
        try:
            return await _update(request)
        finally:
            pending_updates[0] -= 1

    async def _update(request: Request) -> dict[str, Any]:
        start = time.perf_counter()
        if request.headers.get("content-type", "").startswith("application/octet-stream"):
            req = _weight_headers(request)
            data = await request.body()
            state = await asyncio.to_thread(read_state_dict, data=data)
            named = payload_weights_id(data=data)
        else:
            req = WeightUpdateRequest.model_validate(await _json_body(request))
            state = await asyncio.to_thread(read_state_dict, path=req.path)
            named = payload_weights_id(path=req.path)
        req.weights_id = req.weights_id or named
        if fault_delay_s:
            await asyncio.sleep(fault_delay_s)
        new_version = await engine.update_weights(
            state, req.version, req.in_flight, adapter=req.adapter, lora_alpha=req.lora_alpha, weights_id=req.weights_id
        )
        return {
            "policy_version": new_version,
            "weights_id": engine.weights_id,
            "seconds": round(time.perf_counter() - start, 4),
        }

    return app


class _RawWeightUpdate(BaseModel):
    version: int | None = None
    in_flight: Literal["finish", "abort"] = "finish"
    adapter: str | None = None
    lora_alpha: float = Field(16.0, gt=0)
    weights_id: str | None = None


def _weight_headers(request: Request) -> _RawWeightUpdate:
    """A raw weight upload's `X-Policy-Version` (optional int), `X-In-Flight` (finish | abort), `X-Weights-Id`,
    and for a LoRA adapter `X-Adapter` and `X-Lora-Alpha`."""
    fields = {field: request.headers.get(header) for field, header in _WEIGHT_HEADERS.items()}
    try:
        return _RawWeightUpdate.model_validate({k: v for k, v in fields.items() if v})
    except ValidationError as exc:
        problems = "; ".join(
            f"{_WEIGHT_HEADERS[str(e['loc'][0])]}: {e['msg']} (got {e['input']!r})" for e in exc.errors()
        )
        raise RequestError(f"bad weight upload headers: {problems}") from exc


_WEIGHT_HEADERS = {
    "version": "X-Policy-Version",
    "in_flight": "X-In-Flight",
    "adapter": "X-Adapter",
    "lora_alpha": "X-Lora-Alpha",
    "weights_id": "X-Weights-Id",
}


async def _json_body(request: Request) -> Any:
    try:
        return await request.json()
    except ValueError as exc:
        raise RequestError(f"the body is not valid JSON: {exc}") from exc


def _render_chat(tokenizer: Any, body: ChatCompletionRequest) -> list[int]:
    """Apply the chat template to text, then tokenize it without adding special tokens (as vLLM does)."""
    try:
        text = tokenizer.apply_chat_template(
            body.messages,
            tools=body.tools,
            add_generation_prompt=body.add_generation_prompt and not body.continue_final_message,
            continue_final_message=body.continue_final_message,
            tokenize=False,
            **body.chat_template_kwargs,
        )
    except Exception as exc:
        raise RequestError(f"cannot apply the chat template to these messages: {exc}") from exc
    return list(tokenizer(text, add_special_tokens=False).input_ids)
