"""Typed results across the process boundary.

The child sends two pickles: a small *meta* dict (status, exception type name,
traceback text, message) and the *payload* (the return value or the exception
object). Keeping them apart means an exception whose class cannot be pickled or
re-created in the parent still arrives as its type name and traceback text, and a
return value keeps its exact type (tuples stay tuples).
"""

from __future__ import annotations

import pickle
import traceback
from dataclasses import dataclass
from typing import Any

from branching_core.errors import InvalidTypeError, ProcessBranchError, shown_class

_PROTOCOL = pickle.HIGHEST_PROTOCOL


def _qualname(exc_type: type[BaseException]) -> str:
    exc_type = shown_class(exc_type)
    module = exc_type.__module__
    return exc_type.__qualname__ if module == "builtins" else f"{module}.{exc_type.__qualname__}"


def encode_value(value: object) -> tuple[bytes, bytes]:
    """Meta and payload for a return value; a value that cannot be pickled becomes an error."""
    try:
        payload = pickle.dumps(value, protocol=_PROTOCOL)
    except Exception as exc:
        return encode_exception(
            InvalidTypeError(f"the return value ({type(value).__name__}) cannot be pickled: {exc}"),
            traceback_text=traceback.format_exc(),
        )
    return pickle.dumps({"status": "ok"}, protocol=_PROTOCOL), payload


def encode_exception(exc: BaseException, traceback_text: str | None = None) -> tuple[bytes, bytes]:
    """Meta and payload for an exception; the payload is empty when it cannot be pickled."""
    text = traceback_text or "".join(traceback.format_exception(exc))
    meta = {
        "status": "error",
        "exc_type": _qualname(type(exc)),
        "message": str(exc),
        "traceback": text,
    }
    try:
        payload = pickle.dumps(exc, protocol=_PROTOCOL)
    except Exception:
        payload = b""
    try:
        meta_bytes = pickle.dumps(meta, protocol=_PROTOCOL)
    except Exception:  # str(exc) itself misbehaved
        meta["message"] = repr(type(exc))
        meta_bytes = pickle.dumps(meta, protocol=_PROTOCOL)
    return meta_bytes, payload


@dataclass
class DecodedResult:
    ok: bool
    value: Any = None
    error: ProcessBranchError | None = None


def decode(meta_bytes: bytes, payload: bytes, *, exit_code: int | None) -> DecodedResult:
    """Turn the child's two pickles back into a value or a ``ProcessBranchError``."""
    try:
        meta = pickle.loads(meta_bytes)
    except Exception as exc:
        return DecodedResult(False, error=ProcessBranchError(
            f"the branch's result could not be decoded: {exc}", exit_code=exit_code))
    if meta.get("status") == "ok":
        try:
            return DecodedResult(True, value=pickle.loads(payload))
        except Exception as exc:
            return DecodedResult(False, error=ProcessBranchError(
                f"the branch's return value could not be unpickled here: {exc!r}",
                exc_type=_qualname(type(exc)), exit_code=exit_code))
    exception: BaseException | None = None
    if payload:
        try:
            loaded = pickle.loads(payload)
            if isinstance(loaded, BaseException):
                exception = loaded
        except Exception:
            exception = None
    exc_type = str(meta.get("exc_type", "Exception"))
    message = str(meta.get("message", ""))
    err = ProcessBranchError(
        f"branch raised {exc_type}: {message}" if message else f"branch raised {exc_type}",
        exception=exception,
        exc_type=exc_type,
        child_traceback=str(meta.get("traceback", "")),
        exit_code=exit_code,
    )
    if exception is not None:
        err.__cause__ = exception
    return DecodedResult(False, error=err)


__all__ = ["DecodedResult", "decode", "encode_exception", "encode_value"]
