"""One rule for every workspace tool: whatever goes wrong, the model gets a readable failure.

Why a wrapper on top of each tool's own checks: the tools turn every failure they foresee
into :class:`pydantic_ai.ToolFailed` at its cause, but a tool that lets one unforeseen
exception escape (an ``OSError`` from an odd filesystem, a ``ValueError`` from odd input)
ends the whole agent run -- in a fork, a branch dies for a typo of the model's. The wrapper
turns such an exception into a ``ToolFailed`` naming the tool and the error, logs it (it is
still a bug to fix at its cause), and leaves pydantic-ai's control-flow exceptions alone.

It also makes every result safe to send: file names that are not UTF-8 reach Python as lone
surrogates, which a model provider's JSON encoder rejects; they are shown as ``\\xNN``.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable
from typing import Any, TypeVar, cast

from pydantic_ai import ToolFailed
from pydantic_ai.exceptions import ApprovalRequired, CallDeferred, ModelRetry

from branching_core.errors import error_name

_log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])

_PASS_THROUGH = (ToolFailed, ModelRetry, CallDeferred, ApprovalRequired)


def printable(text: str) -> str:
    """``text`` with lone surrogates (undecodable file-name bytes) shown as ``\\xNN``."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return text


def _failure(name: str, exc: Exception) -> ToolFailed:
    _log.warning("workspace tool %s failed unexpectedly", name, exc_info=exc)
    detail = printable(str(exc))[:300] or error_name(exc)
    return ToolFailed(f"{name} failed: {error_name(exc)}: {detail}")


def _safe_failure(exc: ToolFailed) -> ToolFailed:
    message = printable(exc.message)
    return exc if message == exc.message else ToolFailed(message)


def guard_tool(func: F) -> F:
    """Wrap a tool (sync or async) so that it returns printable text or raises a
    ``ToolFailed``; the signature and docstring the model sees are unchanged."""
    name = func.__name__

    if inspect.iscoroutinefunction(func):

        @functools.wraps(func)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                result = await func(*args, **kwargs)
            except ToolFailed as exc:
                raise _safe_failure(exc) from None
            except _PASS_THROUGH:
                raise
            except Exception as exc:
                raise _failure(name, exc) from None
            return printable(result) if isinstance(result, str) else result

        return cast(F, async_wrapper)  # functools.wraps keeps func's signature

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            result = func(*args, **kwargs)
        except ToolFailed as exc:
            raise _safe_failure(exc) from None
        except _PASS_THROUGH:
            raise
        except Exception as exc:
            raise _failure(name, exc) from None
        return printable(result) if isinstance(result, str) else result

    return cast(F, wrapper)  # functools.wraps keeps func's signature


__all__ = ["guard_tool", "printable"]
