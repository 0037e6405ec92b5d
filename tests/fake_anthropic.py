"""A small fake of the Anthropic Messages API (POST /v1/messages) on 127.0.0.1, for tests.

The real ``anthropic`` SDK is pointed at it with ``base_url``. Replies are scripted: a list consumed one
per request (each a reply dict, a :class:`FakeReply`, or a callable taking the recorded request), or a
single callable for every request. Every request is recorded so tests can assert what the engine sent
(system blocks, tools, cache_control, tool_result contents). When the script runs out the server
answers 400 (never retried), so a test that expects fewer turns fails loudly.

Usage: ``with FakeAnthropic([...]) as fake: ...`` or the ``fake_anthropic`` fixture in a test module.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class FakeReply:
    status: int = 200
    body: Any = None  # dict/list -> JSON; str/bytes sent as is
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body.get("messages", [])

    def tool_results(self) -> list[dict[str, Any]]:
        """The tool_result blocks of the last user message."""
        last = self.messages[-1] if self.messages else {}
        content = last.get("content")
        return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"] \
            if isinstance(content, list) else []


Script = list[Any] | Callable[[RecordedRequest], Any]


# ------------------------------------------------------------------ reply builders


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def tool_use(name: str, input: dict[str, Any], id: str | None = None) -> dict[str, Any]:
    return {"type": "tool_use", "id": id or f"toolu_{uuid.uuid4().hex[:20]}", "name": name, "input": input}


def message(*blocks: dict[str, Any], stop_reason: str | None = None, model: str = "claude-sonnet-4-6",
            input_tokens: int = 100, output_tokens: int = 20, cache_creation: int = 0,
            cache_read: int = 0) -> dict[str, Any]:
    if stop_reason is None:
        stop_reason = "tool_use" if any(b.get("type") == "tool_use" for b in blocks) else "end_turn"
    return {
        "id": f"msg_{uuid.uuid4().hex[:20]}", "type": "message", "role": "assistant", "model": model,
        "content": list(blocks), "stop_reason": stop_reason, "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens,
                  "cache_creation_input_tokens": cache_creation, "cache_read_input_tokens": cache_read},
    }


def error_reply(status: int, kind: str, text: str, retry_after_ms: int | None = None,
                should_retry: bool | None = None) -> FakeReply:
    headers: dict[str, str] = {}
    if retry_after_ms is not None:
        headers["retry-after-ms"] = str(retry_after_ms)  # the SDK waits this long instead of backing off
    if should_retry is not None:
        headers["x-should-retry"] = "true" if should_retry else "false"
    return FakeReply(status, {"type": "error", "error": {"type": kind, "message": text}}, headers)


def rate_limited() -> FakeReply:
    return error_reply(429, "rate_limit_error", "Number of requests has exceeded your rate limit",
                       retry_after_ms=5)


def server_error() -> FakeReply:
    return error_reply(500, "api_error", "Internal server error", retry_after_ms=5)


# ------------------------------------------------------------------ the server


class FakeAnthropic:
    def __init__(self, script: Script | None = None) -> None:
        self.script: Script = script if script is not None else []
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._served = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "server not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def _next(self, req: RecordedRequest) -> FakeReply:
        with self._lock:
            if callable(self.script):
                item = self.script(req)
            elif self._served < len(self.script):
                item = self.script[self._served]
            else:
                item = error_reply(400, "invalid_request_error",
                                   f"fake server: script exhausted after {len(self.script)} replies")
            self._served += 1
        if callable(item) and not isinstance(item, FakeReply):
            item = item(req)
        return item if isinstance(item, FakeReply) else FakeReply(200, item)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:  # http.server's naming
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"_unparsed": raw.decode("utf-8", "replace")}
                req = RecordedRequest(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                with fake._lock:
                    fake.requests.append(req)
                if self.path.split("?")[0] != "/v1/messages":
                    reply = error_reply(404, "not_found_error", f"no route {self.path}")
                else:
                    reply = fake._next(req)
                data = reply.body
                payload = data if isinstance(data, bytes) else (
                    data.encode() if isinstance(data, str) else json.dumps(data).encode())
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(payload)

        return Handler

    def start(self) -> FakeAnthropic:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-anthropic", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeAnthropic:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
