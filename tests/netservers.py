"""Local servers for the transport tests, all on 127.0.0.1, and what they are made of.

Two kinds of server:

- `raw_server()`: a server of one test's own, on the test's event loop, that runs a
  `Respond` function for each connection it accepts (the HTTP/1.1 client's tests,
  `tests/test_http11*.py`), with `counting_proxy()` and `connect_proxy()` to put in front
  of it.
- `running_servers()`: a scripted HTTP/1.1 server on plain and TLS listeners, and a
  forward proxy, on an event loop of their own in a thread, so one set, started once per
  test module, serves tests on asyncio and trio alike (the transport conformance suite).
  A test adds a `Route` whose handler (an async function, run on the servers' loop)
  answers each request to the route's path, and reads back what the route saw: every
  request, and the connection it came on. A test and a handler wait for each other with
  `threading.Event`s (`wait_for()` in a test, `Peer.wait()` in a handler), never with
  sleeps; every such wait has a generous bound, so a transport that does not do its part
  fails instead of hanging.

Both read requests and send bytes through a `Peer`, and answer with the canned bytes of
`response()`, `chunked()` and `framed()`.
"""

from __future__ import annotations

import gzip
import itertools
import ssl
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import anyio
import anyio.abc
import anyio.from_thread
import anyio.to_thread
from anyio.abc import SocketAttribute
from anyio.streams.buffered import BufferedByteReceiveStream
from anyio.streams.tls import TLSListener

__all__ = [
    "PATIENCE",
    "ForwardProxy",
    "Handler",
    "Peer",
    "RawServer",
    "Request",
    "Respond",
    "Route",
    "Servers",
    "answer",
    "answer_each",
    "answer_once",
    "chunked",
    "connect_proxy",
    "counting_proxy",
    "drip",
    "framed",
    "raw_server",
    "response",
    "running_servers",
    "server_names",
    "wait_for",
    "wait_for_eof",
]

#: The longest a handler or a test waits for the other side before giving up.
PATIENCE = 10.0

_CLOSED = (
    anyio.EndOfStream,
    anyio.IncompleteRead,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
    ConnectionError,
    ssl.SSLError,
)


# -- the pieces: a connection's server side, canned answers, relaying ---------------------------


@dataclass
class Request:
    """One request as a server or the proxy read it."""

    connection: int  # which connection (numbered from 1: per server, or over all listeners)
    method: str
    target: str
    headers: dict[str, str]  # lower-case names
    body: bytes
    head: bytes  # the request line and header lines, as sent


class Peer:
    """The server side of one connection: read requests, send bytes."""

    def __init__(self, number: int, stream: anyio.abc.ByteStream) -> None:
        self.number = number
        self.stream = stream
        self.reader = BufferedByteReceiveStream(stream)

    async def read_request(self, body: bool = True) -> Request | None:
        """The next request (its body too, unless `body` is False), or None once the client
        closed the connection."""
        try:
            head = await self.reader.receive_until(b"\r\n\r\n", 1 << 20)
        except _CLOSED:
            return None
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        request = Request(self.number, method, target, headers, b"", head)
        if body:
            request.body = await self.read_body(request)
        return request

    async def read_body(self, request: Request) -> bytes:
        """The body of `request`, by its Content-Length."""
        if "chunked" in request.headers.get("transfer-encoding", ""):
            raise AssertionError("the client sent a chunked request body")
        return await self.reader.receive_exactly(int(request.headers.get("content-length", "0")))

    async def send(self, data: bytes, piece: int = 0, pause: float = 0.0) -> None:
        """Send `data`: at once, or in pieces of `piece` bytes, `pause` seconds apart (a
        dripping server's pace, not a way to wait for the client)."""
        if not piece:
            await self.stream.send(data)
            return
        for start in range(0, len(data), piece):
            await self.stream.send(data[start : start + piece])
            if pause:
                await anyio.sleep(pause)

    async def wait_closed(self) -> bytes:
        """Read until the client closes the connection: what it sent meanwhile (at most
        PATIENCE seconds)."""
        got = bytearray()
        with anyio.move_on_after(PATIENCE), suppress(*_CLOSED):
            while True:
                got += await self.reader.receive()
        return bytes(got)

    @staticmethod
    async def wait(event: threading.Event, seconds: float = PATIENCE) -> bool:
        """Wait for a test to set `event` (at most `seconds`): whether it did."""
        return await anyio.to_thread.run_sync(event.wait, seconds, abandon_on_cancel=True)


#: A whole OpenAI chat completion, as a server answers one.
OPENAI_COMPLETION = {
    "id": "c1",
    "object": "chat.completion",
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "4"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
}


def response(
    body: bytes = b'{"ok":true}', status: str = "200 OK", headers: str = "", length: bool = True
) -> bytes:
    """A whole HTTP/1.1 response: by Content-Length unless `length` is False."""
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{headers}"
    if length:
        head += f"Content-Length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + body


def chunked(body: bytes, size: int = 5, trailers: str = "") -> bytes:
    """`body` in the chunked transfer coding (with extensions), ended with `trailers`."""
    out = b""
    for start in range(0, len(body), size):
        piece = body[start : start + size]
        out += b"%x;ext=1\r\n%b\r\n" % (len(piece), piece)
    return out + b"0\r\n" + trailers.encode() + b"\r\n"


def framed(body: bytes, framing: str, size: int = 600) -> bytes:
    """A whole response carrying `body`: "chunked" (in chunks of `size` bytes), "eof" (no
    length: it ends with the connection) or "gzip" (compressed, by Content-Length)."""
    if framing == "chunked":
        return response(chunked(body, size), headers="Transfer-Encoding: chunked\r\n", length=False)
    if framing == "eof":
        return response(body, length=False)
    if framing == "gzip":
        return response(gzip.compress(body), headers="Content-Encoding: gzip\r\n")
    raise ValueError(f"no framing {framing!r}")


async def _pump(source: anyio.abc.ByteReceiveStream, sink: anyio.abc.ByteSendStream) -> None:
    with suppress(*_CLOSED):
        while True:
            await sink.send(await source.receive())


async def _relay(peer: Peer, upstream: anyio.abc.ByteStream) -> None:
    """Carry bytes both ways between `peer`'s client and `upstream` until either side ends
    (closing `upstream` is the caller's)."""
    async with anyio.create_task_group() as tg:

        async def one_way(
            source: anyio.abc.ByteReceiveStream, sink: anyio.abc.ByteSendStream
        ) -> None:
            await _pump(source, sink)
            tg.cancel_scope.cancel()

        tg.start_soon(one_way, peer.reader, upstream)
        await one_way(upstream, peer.stream)


async def _tunnel(peer: Peer, port: int) -> None:
    """Answer a CONNECT with 200 and carry the tunnel to 127.0.0.1:`port` until either end
    closes it."""
    async with await anyio.connect_tcp("127.0.0.1", port) as upstream:
        await peer.send(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await _relay(peer, upstream)


class _QuietTLSListener(TLSListener):
    """A TLS listener that closes a failed handshake without logging it (tests provoke
    them on purpose)."""

    @staticmethod
    async def handle_handshake_error(exc: BaseException, stream: anyio.abc.AnyByteStream) -> None:
        await anyio.aclose_forcefully(stream)
        if not isinstance(exc, Exception):
            raise exc


@contextmanager
def server_names(context: ssl.SSLContext) -> Iterator[list[str | None]]:
    """The server names (SNI) that clients ask a server with `context` for, while in the
    block."""
    names: list[str | None] = []
    context.sni_callback = lambda sock, name, ctx: names.append(name)
    try:
        yield names
    finally:
        context.sni_callback = None


# -- a server of one test's own -------------------------------------------------------------------


class RawServer:
    """A TCP (or TLS) server on 127.0.0.1 that runs a `Respond` for each connection."""

    def __init__(self, port: int, tls: bool) -> None:
        self.port = port
        self.tls = tls
        self.connections = 0
        self.requests: list[bytes] = []  # what the Respond functions kept (request heads)
        self.ended: list[anyio.Event] = []  # per connection: set once its handler finished

    def url(self, path: str = "/v1/chat/completions", host: str = "127.0.0.1") -> str:
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}{path}"


#: Serves one connection of a `RawServer`, and returns when done with it.
Respond = Callable[[Peer, RawServer], Awaitable[None]]


@asynccontextmanager
async def raw_server(
    respond: Respond, tls: ssl.SSLContext | None = None
) -> AsyncIterator[RawServer]:
    """A `RawServer` running `respond` for each connection, on the test's event loop;
    `tls`: its server context, for https."""
    listener: anyio.abc.Listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    raw = RawServer(listener.extra(SocketAttribute.local_port), tls is not None)
    if tls is not None:
        listener = _QuietTLSListener(listener, tls, standard_compatible=False)

    async def handle(stream: anyio.abc.ByteStream) -> None:
        raw.connections += 1
        ended = anyio.Event()
        raw.ended.append(ended)
        try:
            async with stream:
                with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                    await respond(Peer(raw.connections, stream), raw)
        finally:
            ended.set()

    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, handle)
        yield raw
        tg.cancel_scope.cancel()


def answer_each(data: bytes, piece: int = 0) -> Respond:
    """Answer every request on a connection with `data` (sent in `piece`-byte pieces)."""

    async def respond(conn: Peer, server: RawServer) -> None:
        while (request := await conn.read_request()) is not None:
            server.requests.append(request.head)
            await conn.send(data, piece)

    return respond


def answer_once(data: bytes) -> Respond:
    """Answer one request with `data`, then close the connection."""

    async def respond(conn: Peer, server: RawServer) -> None:
        request = await conn.read_request()
        if request is not None:
            server.requests.append(request.head)
            await conn.send(data)

    return respond


async def wait_for_eof(conn: Peer, server: RawServer) -> None:
    """Read one request, never answer it, and return once the client closes."""
    request = await conn.read_request()
    assert request is not None
    server.requests.append(request.head)
    assert await conn.read_request() is None


def drip(length: int = 150, pause: float = 0.02) -> Respond:
    """Answer with a body of `length` bytes sent one at a time, `pause` seconds apart: each
    well within the read timeout, the whole far beyond a short total."""

    async def respond(conn: Peer, server: RawServer) -> None:
        request = await conn.read_request()
        assert request is not None
        server.requests.append(request.head)
        await conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % length)
        await conn.send(
            b"x" * length, piece=1, pause=pause
        )  # the pace under test, not a synchronisation

    return respond


@asynccontextmanager
async def counting_proxy(port: int) -> AsyncIterator[RawServer]:
    """A TCP proxy to 127.0.0.1:`port` that counts the connections made through it."""

    async def relay(conn: Peer, server: RawServer) -> None:
        async with await anyio.connect_tcp("127.0.0.1", port) as upstream:
            await _relay(conn, upstream)

    async with raw_server(relay) as proxy:
        yield proxy


def connect_proxy(refusal: bytes | None = None) -> Respond:
    """A proxy that answers CONNECT with `refusal`, or else with 200, and then relays the
    tunnel to 127.0.0.1 at the port asked for (whatever host was named). It keeps the
    CONNECT's head."""

    async def respond(conn: Peer, server: RawServer) -> None:
        request = await conn.read_request()
        assert request is not None
        server.requests.append(request.head)
        if refusal is not None:
            await conn.send(refusal)
            return
        await _tunnel(conn, int(request.target.rpartition(":")[2]))

    return respond


# -- the servers of the conformance suite, on a loop of their own -------------------------------


async def wait_for(event: threading.Event) -> None:
    """In a test: wait for a handler to set `event` (at most PATIENCE seconds)."""
    if not await anyio.to_thread.run_sync(event.wait, PATIENCE, abandon_on_cancel=True):
        raise AssertionError("the server never got there")


#: Answers one request on `peer`; True keeps the connection for another request.
Handler = Callable[["Peer", Request, "Route"], Awaitable[bool]]


@dataclass(eq=False)
class Route:
    """A path on the servers, its handler, and what it saw."""

    servers: Servers
    path: str
    handler: Handler
    read_body: bool = True  # False: the handler gets the request with its body unread
    seen: list[Request] = field(default_factory=list)
    events: dict[str, threading.Event] = field(default_factory=dict)
    notes: dict[str, Any] = field(default_factory=dict)

    def url(self, rest: str = "/v1/chat/completions", on: str = "plain") -> str:
        """The URL of `rest` under this route on listener `on` (plain, other, tls, wrong_name)."""
        port = self.servers.ports[on]
        scheme = "https" if on in ("tls", "wrong_name") else "http"
        return f"{scheme}://127.0.0.1:{port}{self.path}{rest}"

    @property
    def connections(self) -> list[int]:
        """The connections the route's requests came on, each once, in order."""
        return list(dict.fromkeys(request.connection for request in self.seen))

    def event(self, name: str) -> threading.Event:
        """A named event shared by the test and the handler."""
        return self.events.setdefault(name, threading.Event())


def answer(data: bytes, keep: bool = True, piece: int = 0) -> Handler:
    """Answer every request with `data`; close after it unless `keep`."""

    async def handler(peer: Peer, request: Request, route: Route) -> bool:
        await peer.send(data, piece)
        return keep

    return handler


class ForwardProxy:
    """An HTTP forward proxy to 127.0.0.1 only: absolute-form requests for http, CONNECT
    tunnels for https. With `authorization` set, a request without that exact
    Proxy-Authorization gets a 407 and the connection closes. `seen` is every request it
    got (absolute-form requests and CONNECTs)."""

    def __init__(self, servers: Servers) -> None:
        self.servers = servers
        self.port = 0
        self.authorization: str | None = None
        self.seen: list[Request] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def reset(self, authorization: str | None = None) -> None:
        self.authorization = authorization
        self.seen = []

    async def serve(self, peer: Peer) -> None:
        upstream: anyio.abc.ByteStream | None = None
        try:
            async with anyio.create_task_group() as tg:
                while (request := await peer.read_request()) is not None:
                    self.seen.append(request)
                    if (
                        self.authorization is not None
                        and request.headers.get("proxy-authorization") != self.authorization
                    ):
                        await peer.send(
                            b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                            b'Proxy-Authenticate: Basic realm="tests"\r\n'
                            b"Connection: close\r\nContent-Length: 0\r\n\r\n"
                        )
                        break
                    if request.method == "CONNECT":
                        host, _, port = request.target.rpartition(":")
                        if host != "127.0.0.1":
                            raise AssertionError(f"CONNECT to {request.target}")
                        await _tunnel(peer, int(port))
                        break
                    target = urlsplit(request.target)
                    if target.scheme != "http" or target.hostname != "127.0.0.1":
                        raise AssertionError(f"a proxied request for {request.target}")
                    if upstream is None:
                        upstream = await anyio.connect_tcp("127.0.0.1", target.port or 80)
                        tg.start_soon(self._back, upstream, peer, tg.cancel_scope)
                    await upstream.send(self._origin_form(request))
                tg.cancel_scope.cancel()
        finally:
            if upstream is not None:
                await anyio.aclose_forcefully(upstream)

    @staticmethod
    async def _back(upstream: anyio.abc.ByteStream, peer: Peer, scope: anyio.CancelScope) -> None:
        await _pump(upstream, peer.stream)
        scope.cancel()  # the server closed: so does the proxy, towards the client

    @staticmethod
    def _origin_form(request: Request) -> bytes:
        lines = request.head.split(b"\r\n")
        target = urlsplit(request.target)
        path = (target.path or "/") + (f"?{target.query}" if target.query else "")
        first = f"{request.method} {path} HTTP/1.1".encode()
        kept = [
            line
            for line in lines[1:]
            if line.split(b":", 1)[0].strip().lower()
            not in (b"proxy-authorization", b"proxy-connection")
        ]
        return b"\r\n".join([first, *kept]) + b"\r\n\r\n" + request.body


class Servers:
    """The listeners (`ports`: plain, other: a second plain one, i.e. another origin,
    tls: a certificate for 127.0.0.1, wrong_name: one for another name), the proxy, and
    the routes they share."""

    def __init__(self) -> None:
        self.ports: dict[str, int] = {}
        self.proxy = ForwardProxy(self)
        self.routes: dict[str, Route] = {}
        self.errors: list[BaseException] = []  # what handlers raised
        self._numbers = itertools.count(1)
        self._paths = itertools.count(1)

    def route(self, handler: Handler, read_body: bool = True) -> Route:
        """A new path, answered by `handler`."""
        route = Route(self, f"/r{next(self._paths)}", handler, read_body)
        self.routes[route.path] = route
        return route

    async def _connection(self, stream: anyio.abc.ByteStream) -> None:
        peer = Peer(next(self._numbers), stream)
        try:
            async with stream:
                while (request := await peer.read_request(body=False)) is not None:
                    route = self.routes.get("/" + request.target.split("/", 2)[1])
                    if route is None:
                        await peer.send(response(b"{}", "404 Not Found", "Connection: close\r\n"))
                        return
                    if route.read_body:
                        request.body = await peer.read_body(request)
                    route.seen.append(request)
                    if not await route.handler(peer, request, route):
                        return
        except _CLOSED:
            pass
        except Exception as exc:
            self.errors.append(exc)

    async def _proxy_connection(self, stream: anyio.abc.ByteStream) -> None:
        try:
            async with stream:
                await self.proxy.serve(Peer(next(self._numbers), stream))
        except _CLOSED:
            pass
        except Exception as exc:
            self.errors.append(exc)


@asynccontextmanager
async def _serve(
    servers: Servers, tls: ssl.SSLContext, wrong_name: ssl.SSLContext
) -> AsyncIterator[Servers]:
    listeners: dict[str, anyio.abc.Listener[Any]] = {}
    for name in ("plain", "other", "tls", "wrong_name", "proxy"):
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
        port = listener.extra(SocketAttribute.local_port)
        if name == "proxy":
            servers.proxy.port = port
        else:
            servers.ports[name] = port
        if name in ("tls", "wrong_name"):
            context = tls if name == "tls" else wrong_name
            listener = _QuietTLSListener(listener, context, standard_compatible=False)
        listeners[name] = listener
    try:
        async with anyio.create_task_group() as tg:
            for name, listener in listeners.items():
                handle = servers._proxy_connection if name == "proxy" else servers._connection
                tg.start_soon(listener.serve, handle)
            try:
                yield servers
            finally:
                tg.cancel_scope.cancel()
    finally:
        for listener in listeners.values():
            await listener.aclose()


@contextmanager
def running_servers(tls: ssl.SSLContext, wrong_name: ssl.SSLContext) -> Iterator[Servers]:
    """Start the servers on an event loop in a thread of their own; stop them at the end.
    `tls` and `wrong_name` are the server contexts of the two TLS listeners."""
    with (
        anyio.from_thread.start_blocking_portal(name="test servers") as portal,
        portal.wrap_async_context_manager(_serve(Servers(), tls, wrong_name)) as servers,
    ):
        yield servers
