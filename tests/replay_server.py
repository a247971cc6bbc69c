"""A real HTTP/1.1 server on 127.0.0.1 that answers with recorded replies.

`ReplayServer` serves `Interaction`s (`tests/recordings/cassettes.py`): each request gets
the first recorded interaction not served yet with its method and path (the query is not
compared), answered with the recorded status, headers and body. A streamed body
(`text/event-stream`) goes out chunked, one chunk per event, its bytes exactly the
recorded ones; any other body with a Content-Length. A request nothing recorded answers
is a 418 saying so (no provider retries a 418), and the test sees it as a `ProviderError`.

Every request is kept (`received`): method, path, query, headers (lower-cased) and the
JSON body, so a test can check what our provider sent.

The server runs in a thread of its own (stdlib `ThreadingHTTPServer`), so one server,
started once per test module, serves tests on asyncio and trio alike; `serve()` gives it
the next test's interactions and forgets the last test's.

Example:
    >>> with ReplayServer() as server:
    ...     server.serve(*load("anthropic/ellmer__anthropic-basic.yml"))
    ...     chat = chat_anthropic(base_url=server.url("/v1"), api_key="sk-test")
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import pytest

import vitals_engine as ve
from tests.recordings.cassettes import Interaction
from vitals_engine.pricing import table as pricing

__all__ = ["Received", "ReplayServer", "chat_options", "replay", "replay_server", "replies"]

_EVENT_END = re.compile(rb"\r?\n\r?\n")


@dataclass(frozen=True)
class Received:
    """A request the server received."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: Any  # the JSON body, decoded; None when it had none (or it was not JSON)


def _events(body: bytes) -> list[bytes]:
    """`body` cut after each blank line that ends an event, every byte kept."""
    pieces, start = [], 0
    for match in _EVENT_END.finditer(body):
        pieces.append(body[start : match.end()])
        start = match.end()
    if start < len(body):
        pieces.append(body[start:])
    return pieces


def _request_body(handler: BaseHTTPRequestHandler) -> bytes:
    """The request's body, sent with a Content-Length or chunked."""
    if "chunked" not in handler.headers.get("transfer-encoding", "").lower():
        length = int(handler.headers.get("content-length") or 0)
        return handler.rfile.read(length) if length else b""
    body = bytearray()
    while size := int(handler.rfile.readline().split(b";")[0].strip() or b"0", 16):
        body += handler.rfile.read(size)
        handler.rfile.readline()  # the CRLF after the chunk
    while handler.rfile.readline().strip():  # trailers, up to the blank line
        pass
    return bytes(body)


class ReplayServer:
    """Recorded replies over real HTTP; a context manager (the server runs inside it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: list[Interaction] = []
        self.received: list[Received] = []
        self._http: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- what a test uses -------------------------------------------------------------

    def serve(self, *interactions: Interaction) -> None:
        """Answer the next requests with `interactions`; forget what was served before."""
        with self._lock:
            self._queue = list(interactions)
            self.received = []

    @property
    def unserved(self) -> list[Interaction]:
        """The interactions no request has asked for yet."""
        with self._lock:
            return list(self._queue)

    @property
    def base_url(self) -> str:
        assert self._http is not None, "the server runs inside `with ReplayServer()`"
        host, port = self._http.server_address[:2]
        return f"http://{host}:{port}"

    def url(self, prefix: str = "/v1") -> str:
        """The base URL to give a chat: the server's address and the API's path prefix."""
        return self.base_url + prefix

    # -- the server -------------------------------------------------------------------

    def __enter__(self) -> ReplayServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass  # quiet

            def _answer(self) -> None:
                server._answer(self)

            do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = _answer

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._http.daemon_threads = True
        self._thread = threading.Thread(
            target=self._http.serve_forever, name="replay-server", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._http is not None
        assert self._thread is not None
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(timeout=5)

    def _take(self, method: str, path: str) -> Interaction | None:
        for index, interaction in enumerate(self._queue):
            if interaction.method == method and interaction.path == path:
                return self._queue.pop(index)
        return None

    def _answer(self, handler: BaseHTTPRequestHandler) -> None:
        raw = _request_body(handler)
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        url = urlsplit(handler.path)
        headers = {name.lower(): value for name, value in handler.headers.items()}
        with self._lock:
            self.received.append(Received(handler.command, url.path, url.query, headers, body))
            reply = self._take(handler.command, url.path)
        if reply is None:
            message = f"replay: no recorded reply left for {handler.command} {url.path}"
            self._send(handler, 418, {"content-type": "application/json"},
                       json.dumps({"error": {"message": message}}).encode())  # fmt: skip
        elif reply.streamed:
            self._send_stream(handler, reply)
        else:
            self._send(handler, reply.status, reply.headers, reply.body)

    @staticmethod
    def _send(
        handler: BaseHTTPRequestHandler, status: int, headers: dict[str, str], body: bytes
    ) -> None:
        handler.send_response(status)
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.send_header("content-length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)
        handler.wfile.flush()

    @staticmethod
    def _send_stream(handler: BaseHTTPRequestHandler, reply: Interaction) -> None:
        handler.send_response(reply.status)
        for name, value in reply.headers.items():
            handler.send_header(name, value)
        handler.send_header("transfer-encoding", "chunked")
        handler.end_headers()
        for piece in _events(reply.body):
            handler.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            handler.wfile.flush()
        handler.wfile.write(b"0\r\n\r\n")
        handler.wfile.flush()


@pytest.fixture(scope="module")
def replay_server():
    """One replay server for a test module (import it with `replay`)."""
    with ReplayServer() as server:
        yield server


@pytest.fixture
def replay(replay_server, monkeypatch):
    """The module's replay server, its queue empty; prices a test sets stay in the test."""
    monkeypatch.setattr(pricing, "_user_prices", {})
    monkeypatch.setattr(pricing, "_found", {})
    replay_server.serve()
    yield replay_server
    replay_server.serve()


def chat_options(server: ReplayServer, root: str = "/v1") -> dict[str, Any]:
    """What a chat needs to talk to `server` under `root`: one attempt, short timeouts."""
    return {
        "base_url": server.url(root),
        "api_key": "sk-test",
        "retry": ve.Retry(max_attempts=1),
        "timeouts": ve.Timeouts(connect=5, read=10, total=30),
    }


def replies(chat: ve.Chat) -> list[ve.Turn]:
    """The assistant's turns of a chat."""
    return [turn for turn in chat.turns if turn.role == "assistant"]
