"""A small HTTP/1.1 server on anyio, for the bridge: requests read whole (a body by its
length or in chunks), each answered whole or as a stream of chunks, connections kept
alive between requests.

Why our own and not aiohttp's: the bridge runs inside a sample, on the run's event loop
(asyncio or trio), and its handlers must run in the sample's context (its limits, its
transcript, its call scope). aiohttp's server runs only on asyncio.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus

import anyio
import anyio.abc

from .._logging import log

__all__ = ["HttpRequest", "Responder", "serve_http"]

MAX_HEAD = 64 * 1024
MAX_BODY = 256 * 1024 * 1024
_READ = 65536


class _BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class HttpRequest:
    """One request: method, target (path and query), headers (names in lower case), body."""

    method: str
    target: str
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]


class _Reader:
    """Bytes of one connection, read as a request needs them."""

    def __init__(self, stream: anyio.abc.ByteStream) -> None:
        self.stream = stream
        self.buffer = bytearray()

    async def _more(self) -> bool:
        try:
            self.buffer += await self.stream.receive(_READ)
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            return False
        return True

    async def until(self, marker: bytes, limit: int) -> bytes | None:
        """Bytes up to `marker` (taken, marker included); None: the connection ended."""
        while (end := self.buffer.find(marker)) < 0:
            if len(self.buffer) > limit:
                raise _BadRequest(431, "The request's head is too large.")
            if not await self._more():
                return None
        taken = bytes(self.buffer[: end + len(marker)])
        del self.buffer[: end + len(marker)]
        return taken

    async def exactly(self, size: int) -> bytes:
        while len(self.buffer) < size:
            if not await self._more():
                raise _BadRequest(400, "The connection ended inside the request's body.")
        taken = bytes(self.buffer[:size])
        del self.buffer[:size]
        return taken


def _head(raw: bytes) -> tuple[str, str, dict[str, str]]:
    lines = raw.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise _BadRequest(400, "The request line is not HTTP/1.1.")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip():
            raise _BadRequest(400, f"A header line is malformed: {line[:80]!r}.")
        key = name.lower()
        headers[key] = f"{headers[key]}, {value.strip()}" if key in headers else value.strip()
    return parts[0], parts[1], headers


async def _chunked(reader: _Reader) -> bytes:
    body = bytearray()
    while True:
        line = await reader.until(b"\r\n", 1024)
        if line is None:
            raise _BadRequest(400, "The connection ended inside a chunked body.")
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise _BadRequest(400, "A chunk's size is not hexadecimal.") from None
        if size == 0:
            while await reader.until(b"\r\n", MAX_HEAD) not in (None, b"\r\n"):
                pass  # trailers: none the bridge reads
            return bytes(body)
        if len(body) + size > MAX_BODY:
            raise _BadRequest(413, "The request's body is too large.")
        body += await reader.exactly(size)
        await reader.exactly(2)


async def _read_request(reader: _Reader, stream: anyio.abc.ByteStream) -> HttpRequest | None:
    raw = await reader.until(b"\r\n\r\n", MAX_HEAD)
    if raw is None:
        return None
    method, target, headers = _head(raw)
    if headers.get("expect", "").lower() == "100-continue":
        await stream.send(b"HTTP/1.1 100 Continue\r\n\r\n")
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = await _chunked(reader)
    else:
        try:
            length = int(headers.get("content-length", "0"))
        except ValueError:
            raise _BadRequest(400, "Content-Length is not a number.") from None
        if length < 0 or length > MAX_BODY:
            raise _BadRequest(413, "The request's body is too large.")
        body = await reader.exactly(length)
    return HttpRequest(method, target, headers, body)


def _status_line(status: int) -> str:
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = "Status"
    return f"HTTP/1.1 {status} {reason}\r\n"


class Responder:
    """How a handler answers its request: `send()` a whole body, or `start()` a stream,
    `write()` its chunks and `end()` it."""

    def __init__(self, stream: anyio.abc.ByteStream, keep_alive: bool) -> None:
        self._stream = stream
        self._keep_alive = keep_alive
        self.started = False
        self.ended = False

    def _head(self, status: int, headers: Mapping[str, str], extra: str) -> bytes:
        lines = [_status_line(status)]
        lines += [f"{name}: {value}\r\n" for name, value in headers.items()]
        lines.append(extra)
        lines.append("Connection: keep-alive\r\n" if self._keep_alive else "Connection: close\r\n")
        return ("".join(lines) + "\r\n").encode("latin-1")

    async def send(self, status: int, headers: Mapping[str, str], body: bytes) -> None:
        """Answer with `body` whole (its length in Content-Length)."""
        self.started = self.ended = True
        head = self._head(status, headers, f"Content-Length: {len(body)}\r\n")
        await self._stream.send(head + body)

    async def start(self, status: int, headers: Mapping[str, str]) -> None:
        """Send the head of a streamed answer (its body in chunks)."""
        self.started = True
        await self._stream.send(self._head(status, headers, "Transfer-Encoding: chunked\r\n"))

    async def write(self, data: bytes) -> None:
        """One chunk of a streamed answer."""
        if data:
            await self._stream.send(b"%x\r\n%s\r\n" % (len(data), data))

    async def end(self) -> None:
        """The end of a streamed answer."""
        self.ended = True
        await self._stream.send(b"0\r\n\r\n")


Handler = Callable[[HttpRequest, Responder], Awaitable[None]]


async def _plain(responder: Responder, status: int, message: str) -> None:
    await responder.send(status, {"Content-Type": "text/plain; charset=utf-8"}, message.encode())


async def _answer(request: HttpRequest, responder: Responder, handler: Handler) -> bool:
    """Run the handler for one request; whether the connection can carry another."""
    try:
        await handler(request, responder)
    except Exception as exc:  # a failure of one request is that request's, not the server's
        log.warning("bridge_request_failed", path=request.path, error=repr(exc))
        if not responder.started:
            await _plain(responder, 500, f"The bridge failed to answer: {exc!r}")
        return False
    if not responder.ended:
        if responder.started:
            return False  # a stream left open: its connection cannot be reused
        await _plain(responder, 500, "The bridge gave no answer to this request.")
    return True


async def _connection(stream: anyio.abc.ByteStream, handler: Handler) -> None:
    reader = _Reader(stream)
    async with stream:
        while True:
            try:
                request = await _read_request(reader, stream)
            except _BadRequest as bad:
                await _plain(Responder(stream, keep_alive=False), bad.status, str(bad))
                return
            if request is None:
                return
            keep_alive = request.headers.get("connection", "").lower() != "close"
            if not await _answer(request, Responder(stream, keep_alive), handler):
                return
            if not keep_alive:
                return


async def serve_http(listener: anyio.abc.Listener[anyio.abc.ByteStream], handler: Handler) -> None:
    """Serve HTTP/1.1 on `listener` until cancelled: each connection in a task of its own,
    each of its requests answered by `handler` in turn.

    Example:
        >>> async def hello(request, responder):
        ...     await responder.send(200, {"Content-Type": "text/plain"}, b"hello")
        >>> listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
        >>> async with anyio.create_task_group() as group:
        ...     group.start_soon(serve_http, listener, hello)
    """

    async def one(stream: anyio.abc.ByteStream) -> None:
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await _connection(stream, handler)  # or the client went away

    async with listener:
        await listener.serve(one)
