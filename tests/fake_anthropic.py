"""A fake Anthropic Messages API on 127.0.0.1 for tests: the real SDK talks to it via ``base_url``.

It records every request (path, headers, JSON body) and answers from a script (a list of
replies, consumed in order) or a responder function ``(body, request_index) -> Reply``.
A reply can be a message, an HTTP error (429/500/529 ...) or a delayed answer (to make the
client time out).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_ids = itertools.count(1)


@dataclass
class Reply:
    status: int = 200
    body: dict[str, Any] = field(default_factory=dict)
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    def tool_names(self) -> list[str]:
        return [t.get("name") for t in self.body.get("tools", [])]

    def text(self) -> str:
        """Everything the request says, flattened (system, messages, tool results)."""
        return json.dumps({"system": self.body.get("system"), "messages": self.body.get("messages")})


def tool_use(name: str, payload: Any, call_id: str | None = None) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id or f"toolu_{next(_ids):04d}", "name": name, "input": payload}


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def message(*blocks: dict[str, Any], model: str = "claude-sonnet-4-6", input_tokens: int = 1200,
            output_tokens: int = 300, cache_read: int = 0, cache_write: int = 0) -> Reply:
    stop = "tool_use" if any(b.get("type") == "tool_use" for b in blocks) else "end_turn"
    return Reply(200, {
        "id": f"msg_{next(_ids):04d}", "type": "message", "role": "assistant", "model": model,
        "content": list(blocks), "stop_reason": stop, "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens,
                  "cache_creation_input_tokens": cache_write, "cache_read_input_tokens": cache_read},
    })


def error(status: int, kind: str, text: str, retry_after: float | None = None) -> Reply:
    headers = {"retry-after": str(retry_after)} if retry_after is not None else {}
    return Reply(status, {"type": "error", "error": {"type": kind, "message": text}}, headers=headers)


def overloaded() -> Reply:
    return error(529, "overloaded_error", "Overloaded")


class FakeAnthropic:
    """``with FakeAnthropic(script=[...]) as server: ... base_url=server.url``."""

    def __init__(self, script: list[Reply] | None = None,
                 responder: Callable[[dict[str, Any], int], Reply] | None = None):
        self.script = list(script or [])
        self.responder = responder
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> FakeAnthropic:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            index = len(self.requests) - 1
            if self.script:
                return self.script.pop(0)
        if self.responder is not None:
            return self.responder(body, index)
        return error(500, "api_error", "the fake server's script ran out")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b"{}"
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = {"unparsable": raw.decode("utf-8", "replace")}
                with server._lock:
                    server.requests.append(Recorded(self.path, {k.lower(): v for k, v in self.headers.items()},
                                                    body))
                reply = server._next_reply(body)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                data = json.dumps(reply.body).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

        return Handler
