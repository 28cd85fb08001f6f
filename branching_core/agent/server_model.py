"""``ServerModel``: how forkdeck talks to a real model server, whatever pydantic-ai model is inside.

Why a wrapper: a real server does things the offline model never does, and each needs one fixed
answer for the TUI, every branch and the CLI alike:

* **limits**: ``max_tokens`` per request (unless the caller set one), a first-token timeout and
  a whole-request timeout, both counted from the moment the server is actually asked (after
  waiting for a slot), raising :class:`ServerTimeout` that says which limit and which server;
* **one slot**: ``max_concurrent_requests`` is a semaphore shared by every ``ServerModel`` of
  the same server in this event loop, held for a whole request or stream;
* **cut streams**: a stream that ends without ``finish_reason`` (a single-slot server that
  interrupts the running request when another arrives) is retried once, then reported as
  :class:`ServerCutResponse` "the server cut the response (is it single-slot?)";
* **usage**: a stream without usage gets an estimate marked ``ESTIMATED`` (never a false 0);
* **budgets mid-stream**: with a :data:`~branching_core.agent.spend.SPEND` context set (the
  fork coordinator sets one per branch), the running cost/tokens are checked at every delta and
  the stream is cut with :class:`~branching_core.agent.spend.BudgetCut` when they cross the cap;
* **readable errors**: HTTP errors become one line naming the status and the server, with the
  body truncated (:func:`branching_core.agent.model_errors.describe_error`).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import anyio
from pydantic_ai.exceptions import (
    ModelAPIError,
    ModelHTTPError,
    ModelRequestTimeout,
    UnexpectedModelBehavior,
)
from pydantic_ai.messages import (
    FinalResultEvent,
    ModelMessage,
    ModelResponse,
    ModelResponseStreamEvent,
    PartDeltaEvent,
    PartEndEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ThinkingPartDelta,
)
from pydantic_ai.models import Model, ModelRequestParameters, StreamedResponse
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings

from branching_core.agent.model_config import ModelConfig
from branching_core.agent.spend import (
    SPEND,
    BudgetCut,
    estimate_input_tokens,
    estimate_usage,
    running_price,
    usage_unmeasured,
)
from branching_core.errors import BranchingError

CUT_MARK = "finish_reason"
EMPTY_MARK = "ended without content"


class ServerTimeout(ModelRequestTimeout, BranchingError):
    """A request hit ``[model] first_token_timeout`` or ``request_timeout``."""

    def __init__(self, model_name: str, timeout: float, setting: str, server: str) -> None:
        super().__init__(model_name, timeout, setting="first_event_timeout"
                         if setting == "first_token_timeout" else "request_timeout")
        what = "no first token" if setting == "first_token_timeout" else "no complete response"
        self.message = (
            f"{what} from the server at {server} within {timeout:g}s "
            f"([model] {setting}); it may be busy (single slot?) or stuck"
        )
        self.args = (self.message,)


class ServerCutResponse(ModelAPIError, BranchingError):
    """The server ended a stream without ``finish_reason``, twice in a row."""

    def __init__(self, model_name: str, server: str) -> None:
        super().__init__(
            model_name,
            f"the server at {server} cut the response twice (is it single-slot? set "
            "[model] max_concurrent_requests = 1)",
        )


_LIMITERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Semaphore]] = (
    weakref.WeakKeyDictionary()
)


def _limiter(key: str, size: int | None) -> asyncio.Semaphore | None:
    """The semaphore shared by every request to server ``key`` in the running loop."""
    if not size or size < 1:
        return None
    loop = asyncio.get_running_loop()
    per_loop = _LIMITERS.setdefault(loop, {})
    sem = per_loop.get(key)
    if sem is None:
        sem = per_loop[key] = asyncio.Semaphore(size)
    return sem


def server_label(model: Model) -> str:
    """Where ``model`` sends its requests, for messages (base URL, else the provider name)."""
    url = getattr(model, "base_url", None)
    if url:
        return str(url).rstrip("/")
    return str(getattr(model, "system", "") or "the provider")


@dataclass(init=False)
class ServerModel(WrapperModel):
    """See the module docstring. ``config`` gives the limits; ``server`` names the server."""

    config: ModelConfig = field(default_factory=ModelConfig)
    server: str = ""

    def __init__(self, wrapped: Model, config: ModelConfig, server: str | None = None) -> None:
        super().__init__(wrapped)
        self.config = config
        self.server = server or server_label(wrapped)

    # -- settings ----------------------------------------------------------------------------
    def _fd_settings(self, model_settings: ModelSettings | None) -> ModelSettings:
        merged: dict[str, Any] = dict(model_settings or {})
        if self.config.max_tokens and "max_tokens" not in merged:
            merged["max_tokens"] = self.config.max_tokens
        if self.config.request_timeout and "timeout" not in merged:
            merged["timeout"] = float(self.config.request_timeout)
        merged.setdefault("max_retries", 1)
        return ModelSettings(**merged)

    def _fd_slot(self) -> asyncio.Semaphore | None:
        return _limiter(self.server, self.config.max_concurrent_requests)

    def _fd_timeout(self, setting: str) -> ServerTimeout:
        value = getattr(self.config, setting)
        return ServerTimeout(self.model_name, float(value), setting, self.server)

    # -- plain requests ---------------------------------------------------------------------
    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        settings = self._fd_settings(model_settings)
        async with AsyncExitStack() as stack:
            slot = self._fd_slot()
            if slot is not None:
                await stack.enter_async_context(slot)
            limit = self.config.request_timeout
            try:
                with anyio.fail_after(limit) if limit else _nullscope():
                    response = await self.wrapped.request(
                        messages, settings, model_request_parameters
                    )
            except TimeoutError:
                raise self._fd_timeout("request_timeout") from None
            except ModelHTTPError as exc:
                raise _readable(exc, self.server) from exc
        if usage_unmeasured(response.usage):
            response.usage = estimate_usage(messages, response)
        return response

    # -- streams ----------------------------------------------------------------------------
    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: Any = None,
    ) -> AsyncGenerator[StreamedResponse]:
        settings = self._fd_settings(model_settings)
        async with AsyncExitStack() as stack:
            slot = self._fd_slot()
            if slot is not None:
                await stack.enter_async_context(slot)
            clock = _Clock(self.config)

            async def open_attempt(
                attempt_stack: AsyncExitStack, clock: _Clock
            ) -> StreamedResponse:
                try:
                    with anyio.fail_after(clock.first_left()) if clock.first_left() else (
                        _nullscope()
                    ):
                        return await attempt_stack.enter_async_context(
                            self.wrapped.request_stream(
                                messages, settings, model_request_parameters, run_context
                            )
                        )
                except TimeoutError:
                    raise self._fd_timeout(clock.expired_setting()) from None
                except ModelHTTPError as exc:
                    raise _readable(exc, self.server) from exc
                except UnexpectedModelBehavior as exc:
                    # The connection closed before the first chunk: a cut, like one mid-stream.
                    if EMPTY_MARK in str(exc):
                        await attempt_stack.aclose()
                        raise ServerCutResponse(self.model_name, self.server) from exc
                    raise

            attempt_stack = AsyncExitStack()
            prior = 0
            try:
                try:
                    first = await open_attempt(attempt_stack, clock)
                except ServerCutResponse:  # asked again, once
                    attempt_stack, clock, prior = AsyncExitStack(), _Clock(self.config), 1
                    first = await open_attempt(attempt_stack, clock)
                stream = _ServedStream(
                    model_request_parameters=model_request_parameters,
                    _owner=self,
                    _messages=messages,
                    _open=open_attempt,
                    _attempt_stack=attempt_stack,
                    _current=first,
                    _clock=clock,
                    _prior_attempts=prior,
                )
                yield stream
            finally:
                # The attempt in use now (a retry replaces the first one's stack).
                current = locals().get("stream")
                await (current._attempt_stack if current is not None else attempt_stack).aclose()


class _nullscope:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


class _Clock:
    """The first-token and whole-request deadlines of one request, from when it was sent."""

    def __init__(self, config: ModelConfig) -> None:
        self.config = config
        self.start = anyio.current_time()
        self.first_seen = False

    def _left(self, limit: float | None) -> float | None:
        if not limit:
            return None
        return max(0.0, limit - (anyio.current_time() - self.start))

    def first_left(self) -> float | None:
        """Seconds left before the next pull times out (first-token or request deadline)."""
        whole = self._left(self.config.request_timeout)
        if self.first_seen:
            return whole
        first = self._left(self.config.first_token_timeout)
        values = [v for v in (whole, first) if v is not None]
        return min(values) if values else None

    def expired_setting(self) -> str:
        whole = self._left(self.config.request_timeout)
        if whole is not None and whole <= 0.0:
            return "request_timeout"
        return "request_timeout" if self.first_seen else "first_token_timeout"


@dataclass(kw_only=True)  # keyword-only: the required fields may follow the base's defaults
class _ServedStream(StreamedResponse):
    """The stream handed to the agent: forwards one attempt's events, retries a cut stream once,
    enforces the deadlines and the branch budget, estimates missing usage."""

    _owner: ServerModel = field(repr=False)
    _messages: list[ModelMessage] = field(default_factory=list, repr=False)
    _open: Any = None
    _attempt_stack: AsyncExitStack | None = None
    _current: StreamedResponse = field(repr=False)
    _clock: _Clock = field(repr=False)
    _output_chars: int = 0
    _prior_attempts: int = 0
    _input_tokens: int | None = None
    _cut_notified: bool = False

    # A property over the base's cached_property: the parts manager is the live attempt's,
    # and a retry replaces the attempt, so it must not be cached here.
    @property
    def _parts_manager(self) -> Any:  # type: ignore[override]  # see the comment above
        return self._current._parts_manager

    @property
    def model_name(self) -> str:
        return self._current.model_name

    @property
    def provider_name(self) -> str | None:
        return self._current.provider_name

    @property
    def provider_url(self) -> str | None:
        return self._current.provider_url

    @property
    def timestamp(self) -> datetime:
        return self._current.timestamp

    @property
    def usage(self) -> Any:
        usage = self._current.usage
        if self._finished and usage_unmeasured(usage):
            return estimate_usage(self._messages, self._current.get())
        return usage

    def get(self) -> ModelResponse:
        response = self._current.get()
        response.usage = self.usage
        if self._cancelled and response.state == "complete":
            response.state = "interrupted"
        return response

    async def close_stream(self) -> None:
        await self._current.cancel()

    async def _pull(self, events: AsyncIterator[ModelResponseStreamEvent]) -> Any:
        left = self._clock.first_left()
        try:
            with anyio.fail_after(left) if left is not None else _nullscope():
                return await events.__anext__()
        except TimeoutError:
            raise self._owner._fd_timeout(self._clock.expired_setting()) from None

    def _check_budget(self, text: str) -> None:
        spend = SPEND.get()
        if spend is None or (spend.rule.budget_usd is None and spend.fork_check is None):
            return
        self._output_chars += len(text)
        rule = spend.rule
        cost, tokens = spend.spent()
        if self._input_tokens is None:
            self._input_tokens = estimate_input_tokens(self._messages)
        in_tokens = self._input_tokens
        out_tokens = (self._output_chars + 3) // 4
        reason = None
        if rule.budget_usd is not None:
            running_cost = None
            if cost is not None:
                running_cost = cost + running_price(rule, self.model_name, in_tokens, out_tokens)
            reason = rule.check(cost_usd=running_cost, tokens=tokens + in_tokens + out_tokens)
        if reason is None and spend.fork_check is not None:
            reason = spend.fork_check(in_tokens + out_tokens)
        if reason is not None:
            if not self._cut_notified:
                self._cut_notified = True
                spend.on_cut(reason)
            raise BudgetCut(reason)

    async def _get_event_iterator(self) -> AsyncIterator[ModelResponseStreamEvent]:
        attempts = self._prior_attempts
        while True:
            attempts += 1
            events = aiter(self._current)
            try:
                while True:
                    try:
                        event = await self._pull(events)
                    except StopAsyncIteration:
                        break
                    self._clock.first_seen = True
                    if isinstance(event, PartEndEvent | FinalResultEvent):
                        continue  # the outer StreamedResponse makes its own
                    text = None
                    if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart):
                        text = event.part.content
                    elif isinstance(event, PartDeltaEvent) and isinstance(
                        event.delta, TextPartDelta | ThinkingPartDelta
                    ):
                        text = event.delta.content_delta  # thinking is billed output too
                    if text:
                        self._check_budget(text)
                    yield event
                return
            except ModelHTTPError as exc:
                raise _readable(exc, self._owner.server) from exc
            except ModelAPIError as exc:
                if CUT_MARK not in str(exc) or isinstance(exc, ServerCutResponse):
                    raise
                if attempts >= 2:
                    raise ServerCutResponse(self.model_name, self._owner.server) from exc
            # The stream was cut: close that attempt and ask again, once.
            assert self._attempt_stack is not None
            await self._attempt_stack.aclose()
            self._attempt_stack = AsyncExitStack()
            self._clock = _Clock(self._owner.config)
            self._output_chars = 0
            spend = SPEND.get()
            if spend is not None and spend.on_restart is not None:
                spend.on_restart()  # consumers drop the cut attempt's partial text
            self._current = await self._open(self._attempt_stack, self._clock)


def _readable(exc: ModelHTTPError, server: str) -> ModelAPIError:
    """One line for an HTTP error: status, server, the start of the body."""
    from branching_core.agent.model_errors import http_error_line

    return ModelAPIError(exc.model_name, http_error_line(exc.status_code, exc.body, server))


__all__ = ["ServerCutResponse", "ServerModel", "ServerTimeout", "server_label"]
