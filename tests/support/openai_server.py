"""A scripted OpenAI-compatible HTTP server on 127.0.0.1, for tests that talk to a real server.

Why a real server and not a mocked client: what broke against llama.cpp/vLLM was HTTP-level
behaviour (SSE streams without a usage chunk or a ``finish_reason``, a server that accepts and
never answers, one slot for every request, 429/500 with huge bodies). This server does each of
those on purpose, over a real socket, so pydantic-ai's real OpenAI provider is what is tested.

* ``POST /v1/chat/completions``: streamed (SSE) or not, per the request's ``stream`` flag.
* ``GET /v1/models``: the configured model names.

What each request gets is scripted: :meth:`ScriptedServer.push` queues :class:`Reply` objects
(first come, first served); with the queue empty, ``default`` answers (a short text). Every
request body is recorded in :attr:`ScriptedServer.requests`.

``single_slot=True`` serves one request at a time (the others wait, like llama.cpp with one
slot); ``interrupt=True`` also cuts the running stream as soon as another request waits (what
llama-cpp-python's ``--interrupt_requests`` does). Handlers that hang or stream slowly poll a
stop flag, so :meth:`stop` (the fixture's teardown) ends them promptly: the server never
outlives its test.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted answer.

    ``kind``: ``text`` (``chunks`` streamed one per SSE event), ``tool`` (one tool call
    ``tool_name(tool_args)``), ``cut`` (the chunks, then the connection closes with no
    ``finish_reason``), ``hang`` (headers never sent), ``error`` (``status`` with ``body``).
    ``usage``: send a final usage chunk (streaming) / a usage object (non-streaming).
    ``delay``: seconds before each chunk (a slow server). ``first_delay``: before the first.
    """

    kind: str = "text"
    chunks: list[str] = field(default_factory=lambda: ["Hello", " from", " the server."])
    usage: bool = True
    tool_name: str = ""
    tool_args: dict[str, Any] = field(default_factory=dict)
    status: int = 200
    body: str = ""
    delay: float = 0.0
    first_delay: float = 0.0
    prompt_tokens: int = 11

    @classmethod
    def text(cls, *chunks: str, usage: bool = True, delay: float = 0.0) -> Reply:
        return cls("text", list(chunks) or ["ok"], usage=usage, delay=delay)

    @classmethod
    def tool(cls, name: str, **args: Any) -> Reply:
        return cls("tool", [], tool_name=name, tool_args=args)

    @classmethod
    def cut(cls, *chunks: str) -> Reply:
        return cls("cut", list(chunks) or ["partial"], usage=False)

    @classmethod
    def hang(cls) -> Reply:
        return cls("hang", [])

    @classmethod
    def error(cls, status: int, body: str) -> Reply:
        return cls("error", [], status=status, body=body)

    @classmethod
    def endless(cls, word: str = "blah ", delay: float = 0.01) -> Reply:
        """A runaway response: streams ``word`` until the client goes away or the server stops."""
        return cls("endless", [word], usage=False, delay=delay)


class _Cut(Exception):
    """The running stream must stop now (interrupted by a waiting request, or server stop)."""


class ScriptedServer:
    """See the module docstring. Use as a context manager, or :func:`scripted_server`."""

    def __init__(
        self,
        models: tuple[str, ...] = ("scripted-model",),
        *,
        single_slot: bool = False,
        interrupt: bool = False,
        default: Reply | None = None,
        port: int = 0,
        require_key: str | None = None,
    ) -> None:
        self.models = models
        self.require_key = require_key
        """When set, ``GET /models`` without ``Authorization: Bearer <it>`` answers 401."""
        self.single_slot = single_slot
        self.interrupt = interrupt
        self.default = default or Reply.text("Hello", " from", " the server.")
        self.requests: list[dict[str, Any]] = []
        self.authorizations: list[str | None] = []  # each POST's Authorization header
        self.queue: list[Reply] = []
        self.handler: Callable[[dict[str, Any]], Reply] | None = None
        self.max_in_flight = 0
        self.cuts = 0
        self.responses_served = 0
        self._in_flight = 0
        self._waiting = 0
        self._lock = threading.Lock()
        self._slot = threading.Lock()
        self._stop = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    # -- life ------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        """The OpenAI base URL (``http://127.0.0.1:PORT/v1``)."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> ScriptedServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- script ----------------------------------------------------------------------------
    def push(self, *replies: Reply) -> None:
        with self._lock:
            self.queue.extend(replies)

    def _next(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            if self.queue:
                return self.queue.pop(0)
        if self.handler is not None:
            return self.handler(body)
        return self.default

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if "messages" in r]

    # -- HTTP ------------------------------------------------------------------------------
    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

            def do_GET(self) -> None:
                wanted = server.require_key
                if wanted and self.headers.get("Authorization") != f"Bearer {wanted}":
                    self._json(401, {"error": {"message": "invalid api key"}})
                elif self.path.rstrip("/").endswith("/models"):
                    data = {
                        "object": "list",
                        "data": [
                            {"id": m, "object": "model", "created": 0, "owned_by": "test"}
                            for m in server.models
                        ],
                    }
                    self._json(200, data)
                else:
                    self._json(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:
                with server._lock:
                    server.authorizations.append(self.headers.get("Authorization"))
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b"{}"
                try:
                    body = json.loads(raw)
                except ValueError:
                    self._json(400, {"error": {"message": "bad json"}})
                    return
                # Claude Code posts to /v1/messages?beta=true: route on the path alone.
                route = self.path.split("?", 1)[0].rstrip("/")
                if route.endswith("/v1/messages"):  # Anthropic's API shape
                    with server._lock:
                        server.requests.append(body)
                    with server._serving():
                        reply = server._next(body)
                        try:
                            server._answer_anthropic(self, body, reply)
                        except (_Cut, BrokenPipeError, ConnectionResetError):
                            self.close_connection = True
                    return
                if route.endswith("/v1/responses"):  # OpenAI's Responses API (Codex CLI)
                    with server._lock:
                        server.requests.append(body)
                    with server._serving():
                        reply = server._next(body)
                        try:
                            server._answer_responses(self, body, reply)
                        except (_Cut, BrokenPipeError, ConnectionResetError):
                            self.close_connection = True
                    return
                if not route.endswith("/chat/completions"):
                    self._json(404, {"error": {"message": f"no route {self.path}"}})
                    return
                with server._lock:
                    server.requests.append(body)
                with server._serving():
                    reply = server._next(body)
                    try:
                        server._answer(self, body, reply)
                    except (_Cut, BrokenPipeError, ConnectionResetError):
                        self.close_connection = True

            def _json(self, status: int, data: Any) -> None:
                payload = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        return Handler

    @contextmanager
    def _serving(self) -> Iterator[None]:
        if self.single_slot:
            with self._lock:
                self._waiting += 1
            while not self._slot.acquire(timeout=0.05):
                if self._stop.is_set():
                    with self._lock:
                        self._waiting -= 1
                    raise _Cut()
            with self._lock:
                self._waiting -= 1
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            yield
        finally:
            with self._lock:
                self._in_flight -= 1
            if self.single_slot:
                self._slot.release()

    def _sleep(self, seconds: float, *, interruptible: bool) -> None:
        """Wait ``seconds``; raise :class:`_Cut` at server stop, or when another request waits
        on an interrupting single-slot server."""
        end = time.monotonic() + seconds
        while True:
            if self._stop.is_set():
                raise _Cut()
            if interruptible and self.interrupt and self._waiting:
                with self._lock:
                    self.cuts += 1
                raise _Cut()
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, 0.02))

    def _answer(self, h: BaseHTTPRequestHandler, body: dict[str, Any], reply: Reply) -> None:
        model = str(body.get("model") or self.models[0])
        if reply.kind == "hang":
            self._sleep(3600, interruptible=False)
            return
        if reply.kind == "error":
            payload = reply.body.encode()
            h.send_response(reply.status)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(payload)))
            h.end_headers()
            h.wfile.write(payload)
            return
        if body.get("stream"):
            self._stream(h, body, reply, model)
        else:
            self._complete(h, reply, model)

    def _answer_anthropic(
        self, h: BaseHTTPRequestHandler, body: dict[str, Any], reply: Reply
    ) -> None:
        """The same script in Anthropic's Messages API shape (``POST /v1/messages``)."""
        model = str(body.get("model") or self.models[0])
        if reply.kind in ("hang", "error"):
            self._answer(h, body, reply)
            return
        out_tokens = max(1, sum(len(c.split()) for c in reply.chunks))
        is_tool = reply.kind == "tool"
        stop = "tool_use" if is_tool else "end_turn"
        if not body.get("stream"):
            content: list[dict[str, Any]] = (
                [{"type": "tool_use", "id": "toolu_1", "name": reply.tool_name,
                  "input": reply.tool_args}]
                if is_tool else [{"type": "text", "text": "".join(reply.chunks)}]
            )
            data = {"id": "msg_scripted", "type": "message", "role": "assistant",
                    "model": model, "content": content, "stop_reason": stop,
                    "stop_sequence": None, "usage": _anthropic_usage(reply, out_tokens)}
            payload = json.dumps(data).encode()
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(payload)))
            h.end_headers()
            h.wfile.write(payload)
            return
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Connection", "close")
        h.end_headers()
        h.close_connection = True

        def send(event: str, data: dict[str, Any]) -> None:
            line = json.dumps({"type": event, **data})
            h.wfile.write(f"event: {event}\ndata: {line}\n\n".encode())
            h.wfile.flush()

        self._sleep(reply.first_delay, interruptible=True)
        send("message_start", {"message": {
            "id": "msg_scripted", "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": _anthropic_usage(reply, 0)}})
        if is_tool:
            send("content_block_start", {"index": 0, "content_block": {
                "type": "tool_use", "id": "toolu_1", "name": reply.tool_name, "input": {}}})
            send("content_block_delta", {"index": 0, "delta": {
                "type": "input_json_delta", "partial_json": json.dumps(reply.tool_args)}})
        else:
            send("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
            for text in reply.chunks:
                self._sleep(reply.delay, interruptible=True)
                send("content_block_delta", {"index": 0, "delta": {"type": "text_delta",
                                                                   "text": text}})
        if reply.kind == "cut":
            with self._lock:
                self.cuts += 1
            return
        send("content_block_stop", {"index": 0})
        send("message_delta", {"delta": {"stop_reason": stop, "stop_sequence": None},
                               "usage": {"output_tokens": out_tokens}})
        send("message_stop", {})

    def _answer_responses(
        self, h: BaseHTTPRequestHandler, body: dict[str, Any], reply: Reply
    ) -> None:
        """The same script in the Responses API's SSE shape (``POST /v1/responses``), what
        the Codex CLI speaks: ``response.created``, one ``response.output_item.done`` (a
        ``function_call`` for a tool reply, else an assistant ``message``), then
        ``response.completed`` with usage."""
        if reply.kind in ("hang", "error"):
            self._answer(h, body, reply)
            return
        self.responses_served += 1
        rid = f"resp_{self.responses_served}"
        if reply.kind == "tool":
            item: dict[str, Any] = {
                "type": "function_call", "id": f"fc_{self.responses_served}",
                "call_id": f"call_{self.responses_served}", "name": reply.tool_name,
                "arguments": json.dumps(reply.tool_args)}
        else:
            item = {"type": "message", "id": f"msg_{self.responses_served}",
                    "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": "".join(reply.chunks),
                                 "annotations": []}]}
        out = max(1, sum(len(c.split()) for c in reply.chunks))
        usage = {"input_tokens": reply.prompt_tokens, "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens": out, "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": reply.prompt_tokens + out}
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Connection", "close")
        h.end_headers()
        h.close_connection = True
        for event in ({"type": "response.created", "response": {"id": rid}},
                      {"type": "response.output_item.done", "output_index": 0, "item": item},
                      {"type": "response.completed", "response": {"id": rid, "usage": usage}}):
            self._sleep(reply.delay, interruptible=True)
            h.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
            h.wfile.flush()

    def _usage(self, reply: Reply) -> dict[str, int]:
        out = max(1, sum(len(c.split()) for c in reply.chunks))
        return {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": out,
            "total_tokens": reply.prompt_tokens + out,
        }

    def _complete(self, h: BaseHTTPRequestHandler, reply: Reply, model: str) -> None:
        self._sleep(reply.first_delay + reply.delay * len(reply.chunks), interruptible=False)
        message: dict[str, Any] = {"role": "assistant", "content": None}
        finish = "stop"
        if reply.kind == "tool":
            message["tool_calls"] = [_tool_call(reply)]
            finish = "tool_calls"
        else:
            message["content"] = "".join(reply.chunks)
        data: dict[str, Any] = {
            "id": "chatcmpl-scripted",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": None if reply.kind == "cut" else finish,
                }
            ],
        }
        if reply.usage:
            data["usage"] = self._usage(reply)
        payload = json.dumps(data).encode()
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(payload)))
        h.end_headers()
        h.wfile.write(payload)

    def _stream(
        self, h: BaseHTTPRequestHandler, body: dict[str, Any], reply: Reply, model: str
    ) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Cache-Control", "no-cache")
        h.send_header("Connection", "close")
        h.end_headers()
        h.close_connection = True
        created = int(time.time())

        def send(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> None:
            chunk: dict[str, Any] = {
                "id": "chatcmpl-scripted",
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                **extra,
            }
            h.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            h.wfile.flush()

        self._sleep(reply.first_delay, interruptible=True)
        send({"role": "assistant", "content": ""})
        finish = "stop"
        if reply.kind == "tool":
            call = _tool_call(reply)
            args = call["function"]["arguments"]
            first = {**call, "index": 0, "function": {"name": reply.tool_name, "arguments": ""}}
            send({"tool_calls": [first]})
            for piece in (args[: len(args) // 2], args[len(args) // 2 :]):
                self._sleep(reply.delay, interruptible=True)
                send({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
            finish = "tool_calls"
        elif reply.kind == "endless":
            while True:
                self._sleep(reply.delay, interruptible=True)
                send({"content": reply.chunks[0]})
        else:
            for text in reply.chunks:
                self._sleep(reply.delay, interruptible=True)
                send({"content": text})
        if reply.kind == "cut":
            with self._lock:
                self.cuts += 1
            return  # the connection closes: no finish_reason, no [DONE]
        send({}, finish)
        wants_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        if reply.usage and wants_usage:
            usage_chunk = {
                "id": "chatcmpl-scripted",
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [],
                "usage": self._usage(reply),
            }
            h.wfile.write(f"data: {json.dumps(usage_chunk)}\n\n".encode())
        h.wfile.write(b"data: [DONE]\n\n")
        h.wfile.flush()


def _anthropic_usage(reply: Reply, output: int) -> dict[str, int]:
    return {"input_tokens": reply.prompt_tokens, "output_tokens": output}


def _tool_call(reply: Reply) -> dict[str, Any]:
    return {
        "id": f"call_{reply.tool_name}_{abs(hash(json.dumps(reply.tool_args))) % 10_000}",
        "type": "function",
        "function": {"name": reply.tool_name, "arguments": json.dumps(reply.tool_args)},
    }


@contextmanager
def scripted_server(**kwargs: Any) -> Iterator[ScriptedServer]:
    """A started :class:`ScriptedServer`, stopped when the block ends."""
    server = ScriptedServer(**kwargs)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    """Serve until interrupted (for trying the README recipes and the TUI by hand):
    ``python -m tests.support.openai_server --port 8080 --model qwen2.5 [--single-slot]``."""
    import argparse

    parser = argparse.ArgumentParser(prog="openai_server")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--model", action="append", default=None)
    parser.add_argument("--single-slot", action="store_true")
    parser.add_argument("--interrupt", action="store_true")
    parser.add_argument("--no-usage", action="store_true")
    args = parser.parse_args(argv)
    default = Reply.text("Hello", " from", " the", " scripted", " server.", usage=not args.no_usage)
    server = ScriptedServer(
        tuple(args.model or ["scripted-model"]), single_slot=args.single_slot,
        interrupt=args.interrupt, default=default, port=args.port,
    )
    print(f"serving {server.url}", flush=True)
    server.start()
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["Reply", "ScriptedServer", "scripted_server"]
