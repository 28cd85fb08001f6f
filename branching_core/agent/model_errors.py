"""One readable line for whatever a model server did wrong.

Why: a branch error is shown in one line of a panel and the overview. pydantic-ai's own texts
are right but opaque there: "Exceeded maximum output retries (1)" for an empty or cut response,
or ``status_code: 422, body: {...}`` with a whole FastAPI validation dump. :func:`describe_error`
says what happened and which server, and never returns more than :data:`MAX_LINE` characters.
"""

from __future__ import annotations

import json
from typing import Any

from branching_core.errors import error_name

MAX_LINE = 300
MAX_BODY = 160

_STATUS_WORDS = {
    400: "rejected the request",
    401: "refused the API key",
    403: "refused access",
    404: "does not know this model or route",
    408: "timed out",
    413: "found the request too large",
    422: "rejected the request as invalid",
    429: "is rate-limiting or busy (429)",
    500: "failed with an internal error",
    502: "has a bad gateway",
    503: "is unavailable or overloaded",
    504: "timed out at its gateway",
}


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _body_text(body: Any) -> str:
    """The useful part of an error body: its ``error.message`` / ``detail`` if any, else all."""
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError:
            return body
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return err["message"]
        if isinstance(err, str):
            return err
        if "detail" in body:
            detail = body["detail"]
            if isinstance(detail, list) and detail and isinstance(detail[0], dict):
                first = detail[0]
                where = ".".join(str(x) for x in first.get("loc", []))
                more = f" (+{len(detail) - 1} more)" if len(detail) > 1 else ""
                return f"{where}: {first.get('msg', '')}{more}"
            return str(detail)
        if isinstance(body.get("message"), str):
            return body["message"]
    return json.dumps(body) if not isinstance(body, str) else body


def http_error_line(status: int, body: Any, server: str) -> str:
    """``the server at URL is rate-limiting or busy (429): <start of the body>``."""
    what = _STATUS_WORDS.get(status, f"answered HTTP {status}")
    if status not in _STATUS_WORDS and 500 <= status < 600:
        what = f"failed (HTTP {status})"
    detail = _one_line(_body_text(body), MAX_BODY) if body not in (None, "", b"") else ""
    line = f"the server at {server} {what}"
    if status not in (429,) and f"{status}" not in what:
        line += f" (HTTP {status})"
    return _one_line(f"{line}: {detail}" if detail else line, MAX_LINE)


def describe_error(exc: BaseException, model: Any = None, history: Any = None) -> str:
    """One line for a branch or turn that failed with ``exc`` while running ``model``.

    ``history`` (the messages so far) lets an "output retries" failure say that the server
    answered with nothing.
    """
    from pydantic_ai.exceptions import (
        ModelAPIError,
        ModelHTTPError,
        UnexpectedModelBehavior,
    )

    from branching_core.agent.server_model import server_label
    from branching_core.agent.spend import BudgetCut

    server = _server_of(model, server_label)
    if isinstance(exc, BudgetCut):
        return _one_line(str(exc), MAX_LINE)
    if isinstance(exc, ModelHTTPError):
        return http_error_line(exc.status_code, exc.body, server)
    if isinstance(exc, ModelAPIError):
        text = getattr(exc, "message", None) or str(exc)
        if server and server not in text:
            text = f"{text} (server: {server})"
        return _one_line(text, MAX_LINE)
    if isinstance(exc, UnexpectedModelBehavior):
        if "output retries" in str(exc) or "empty" in str(exc).lower():
            if _last_response_empty(history):
                return _one_line(
                    f"the server at {server} returned an empty response (no text, no tool call), "
                    "twice", MAX_LINE
                )
            return _one_line(
                f"the model at {server} did not produce a usable answer after a retry ({exc})",
                MAX_LINE,
            )
        return _one_line(f"the model at {server} misbehaved: {exc}", MAX_LINE)
    return _one_line(f"{error_name(exc)}: {exc}", MAX_LINE)


def _server_of(model: Any, label: Any) -> str:
    if model is None:
        return "the model server"
    if isinstance(model, str):
        return model
    try:
        return str(label(model))
    except Exception:
        return "the model server"


def _last_response_empty(history: Any) -> bool:
    from pydantic_ai.messages import ModelResponse

    for message in reversed(list(history or [])):
        if isinstance(message, ModelResponse):
            return not any(
                (getattr(p, "content", None) or getattr(p, "tool_name", None))
                for p in message.parts
            )
    return True


__all__ = ["MAX_LINE", "describe_error", "http_error_line"]
