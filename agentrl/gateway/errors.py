"""What the gateway answers when it refuses or fails a call: OpenAI-shaped errors, so SDK clients raise them as
usual (`openai.BadRequestError` for a 400, ...).

400: a request the gateway cannot read (`param` names the field) or a budget the session hit (`code` names it);
404: an unknown or closed session; a rollout server's own 4xx passes through with its status and message (the
request was the problem); 502: no rollout server could answer.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from agentrl.gateway.messages import MessageError
from agentrl.gateway.session import BudgetExceeded, SessionClosed
from agentrl.gateway.validation import RequestError
from agentrl.loops.builder import TemplateBoundaryError
from agentrl.rollout.errors import RolloutError, ServerRequestError

REFUSED = (SessionClosed, BudgetExceeded, MessageError, TemplateBoundaryError, ValueError, RolloutError)
"""The exceptions a chat call answers with an error (anything else is the gateway's own bug: a 500)."""


def error_body(message: str, type_: str, code: str | None = None, param: str | None = None) -> dict[str, Any]:
    """An OpenAI error object."""
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def error_response(
    status: int, message: str, type_: str, code: str | None = None, param: str | None = None
) -> web.Response:
    """An OpenAI-shaped error answer."""
    return web.json_response(error_body(message, type_, code, param), status=status)


def refusal(exc: BaseException) -> tuple[int, dict[str, Any]]:
    """The status and error body for one of the `REFUSED` exceptions."""
    if isinstance(exc, SessionClosed):
        return 404, error_body(str(exc), "NotFound", "session_closed")
    if isinstance(exc, BudgetExceeded):
        return 400, error_body(str(exc), "BudgetExceeded", exc.reason.value)
    if isinstance(exc, ServerRequestError) and 400 <= exc.status_code < 500:
        return exc.status_code, error_body(f"the policy refused the request: {exc.server_message}", "BadRequestError")
    if isinstance(exc, RolloutError):
        return 502, error_body(f"the rollout server failed: {exc}", "ServerError")
    param = exc.param if isinstance(exc, RequestError) else None
    return 400, error_body(str(exc), "BadRequestError", param=param)
