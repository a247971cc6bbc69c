"""`Http11Transport`: a minimal HTTP/1.1 client of our own over anyio byte streams.

It runs wherever anyio runs (asyncio, uvloop, trio) and costs a small
fraction of what aiohttp or httpx cost per request, because it does only
what the providers need: POST a body, read the response whole (`post()`) or
as it arrives (`stream()`); GET a resource, read whole (`get()`). POST and GET
share one path (`_whole()`): every rule below holds for both.

Invariants:

- A connection goes back to the pool only after its response was read
  completely, to the last byte of the body (and the trailers of a chunked
  body), with nothing left over, only if the response allows keep-alive, and
  only if the whole request went out before the response came. A request
  that fails, times out or is cancelled while its connection is in use closes
  that connection; so does a stream left before its body's end, unless the
  rest of the body had already arrived (it is then read past in the buffer).
  A connection is never returned half-read.
- An idle connection is reused only if nothing is readable on it: just
  before reuse, a zero-timeout poll of its socket (and of the TLS layer's
  decrypted bytes) must find no byte and no EOF. One that fails the check is
  closed, and the next idle one is tried, or a new one opened.
- At most `pool_size` connections are open per pool, in use and idle
  together. A pool is one origin (scheme, host, port) by one route: direct,
  or through one proxy (connections through a proxy never mix with direct
  ones). A request holds one of `pool_size` slots from before it takes a
  connection until after it gave the connection back or closed it (a stream:
  until its block is left), and a connection is opened only when no idle one
  passes the check. Requests beyond that wait for a slot. Idle connections
  are reused last-in, first-out.
- A request is never sent twice in secret. It is sent once more, on a fresh
  connection, only when sending it on a reused connection failed (so the
  server never had all of it; asyncio's transports report a failed write only
  at the next read, so there it is not resent but raises). A connection that
  closes or resets after the request was sent and before any byte of an
  answer raises `ProviderUnavailable`, on a reused connection as on a fresh
  one; the engine's retry policy decides whether to try again.
- A body over 64 KiB is sent while the answer is read: an answer that
  arrives before the body has all gone (a 413) is returned, even when the
  server then closes; the rest is not sent and the connection is closed.
  When sending fails on a fresh connection, an answer already received is
  looked for (briefly) and returned the same way.
- Response limits: a header block of at most 64 KiB and a body (after
  decompression, which never inflates past that limit in memory) of at most
  256 MiB; beyond them the request fails.
- Timeouts: `Timeouts.connect` bounds the TCP connect, a proxy's answer to
  CONNECT and the TLS handshake; `Timeouts.read` bounds sending the request
  and then each wait for more bytes of the response (between chunks for a
  stream); `Timeouts.total` bounds all of one attempt, from holding a slot to
  the body's last byte (redirects included), whatever the pace of the bytes.
  Waiting for a slot is not bounded: our own concurrency is not the server's
  fault.
- Redirects: a 307 or 308 to the same origin (`same_origin_redirect`) is
  followed with the same method, body and headers, at most `MAX_REDIRECTS`
  times; a GET follows a 301, 302 or 303 to the same origin too (as a GET).
  Any other 3xx, and the one after the last hop, is returned as a response.

Requests: header names must be RFC 9110 tokens and values free of CR, LF
and NUL, or a ValueError is raised before anything is sent; Host,
Content-Length, Transfer-Encoding, Connection and Accept-Encoding are ours.
A POST's body goes as given, with its Content-Length; a GET has neither.

Responses: `Content-Length`, `Transfer-Encoding: chunked` (trailers are read
and dropped) or, with neither, read to EOF (that connection is then not
reused); `Connection: close` is honoured, 1xx responses are skipped; gzip
and deflate bodies are decompressed (incrementally when streamed) by
`decoding.py`, as on every transport. TLS: `tls.default_tls()` unless a
context is given.

Proxies: `proxy_for(url)` (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, NO_PROXY) is
read when a URL is first seen, and kept with it. http:// URLs go to the proxy
in absolute form (`POST http://host/path`), with `Proxy-Authorization` when
the proxy has credentials; https:// URLs go through a CONNECT tunnel, inside
which TLS runs with the origin's name. A refused tunnel is an error naming
the proxy and its answer (407: `AuthenticationError`; 5xx:
`ProviderUnavailable`; others: `ProviderError`). No message ever holds the
proxy's credentials. No HTTP/2.
"""

from __future__ import annotations

import math
import re
import select
import ssl
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Literal
from urllib.parse import quote, urlsplit

import anyio
import anyio.abc
import anyio.lowlevel
from anyio.abc import SocketAttribute
from anyio.streams.tls import TLSAttribute, TLSStream

from .._errors import ProviderError, ProviderTimeout, ProviderUnavailable
from .base import (
    MAX_REDIRECTS,
    OWN_HEADERS,
    HttpResponse,
    StreamedResponse,
    Timeouts,
    Transport,
    describe,
    refusal,
    same_origin_redirect,
    timed_out,
)
from .decoding import ACCEPT_ENCODING, MAX_BODY_BYTES, BodyError, decoder_for, decompress, too_large
from .proxies import Proxy, proxy_for, proxy_refused
from .tls import default_tls

__all__ = ["MAX_BODY_BYTES", "MAX_HEADER_BYTES", "Http11Transport"]

#: The most bytes a response's status line and headers may take.
MAX_HEADER_BYTES = 64 * 1024

_RECEIVE = 65536  # bytes asked of each receive()
_JOIN_BODY = 65536  # bodies up to this size go out in the same write as the head
_EARLY_ANSWER = 1.0  # seconds to look for an answer already received after a send failed
_MAX_CHUNK_LINE = 4096  # a chunk-size line, extensions included
_HEX = b"0123456789abcdefABCDEF"
_NO_BODY = frozenset((204, 304))
#: A POST's head, `% (target's prefix, the caller's header lines, body length)`.
_HEAD = b"POST%b%bContent-Length: %d\r\nAccept-Encoding: " + ACCEPT_ENCODING.encode() + b"\r\n\r\n"
#: A GET's head, `% (target's prefix, the caller's header lines)`: no body, no Content-Length.
_GET_HEAD = b"GET%b%bAccept-Encoding: " + ACCEPT_ENCODING.encode() + b"\r\n\r\n"
_DEFAULT_PORTS = {"http": 80, "https": 443}
_MAX_TARGETS = 1024  # distinct URLs whose request line we keep
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110 token: a field name
_TOKENS: set[str] = set()  # header names already found to be tokens
_MAX_TOKENS = 4096
_HAS_POLL = hasattr(select, "poll")


class _ProtocolError(Exception):
    """The server broke HTTP/1.1, or a limit: the message says how. (A body over the limit or
    that does not decode is a `BodyError`.)"""


class _Unsent(Exception):
    """Sending failed on a reused connection: the server never had the whole request."""


class _NoAnswer(Exception):
    """The connection ended after the request was sent, before any byte of an answer."""


class _SendFailed(Exception):
    """Sending failed on a fresh connection and no answer had come (the cause says how)."""


class _Deadline(Exception):
    """A streamed body's wait for more bytes ran out of time (read or total)."""


class _Connection:
    """One keep-alive connection: its stream and the bytes read but not yet parsed."""

    __slots__ = ("buffer", "open", "poller", "reused", "sock", "ssl_object", "stream")

    def __init__(self, stream: anyio.abc.ByteStream) -> None:
        self.stream = stream
        self.buffer = bytearray()
        self.open = True
        self.reused = False  # True once it carried a whole response
        self.sock: Any = stream.extra(SocketAttribute.raw_socket, None)
        self.poller: Any = None
        if _HAS_POLL and self.sock is not None:
            self.poller = select.poll()
            self.poller.register(self.sock.fileno(), select.POLLIN)
        self.ssl_object: ssl.SSLObject | None = stream.extra(TLSAttribute.ssl_object, None)

    def quiet(self) -> bool:
        """Whether nothing (no byte, no EOF, no error) is waiting to be read: safe to reuse."""
        if self.poller is not None:
            if self.poller.poll(0):
                return False
        elif self.sock is not None and select.select([self.sock], [], [], 0)[0]:
            return False
        return self.ssl_object is None or not self.ssl_object.pending()


class _HostPool:
    """The connections of one pool (origin and route): idle ones and the slots to use one."""

    __slots__ = ("idle", "slots")

    def __init__(self, size: int) -> None:
        self.slots = anyio.Semaphore(size)
        self.idle: list[_Connection] = []


class _Target:
    """What a URL resolves to: where to connect, through which proxy, and the start of
    each request."""

    __slots__ = ("authority", "host", "pool", "port", "prefix", "proxy", "tls")

    def __init__(
        self,
        host: str,
        port: int,
        tls: bool,
        prefix: bytes,
        pool: _HostPool,
        proxy: Proxy | None,
    ) -> None:
        self.host = host
        self.port = port
        self.tls = tls
        self.prefix = prefix  # from the request line after its method; Proxy-Authorization too
        self.pool = pool
        self.proxy = proxy
        self.authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


async def _receive(
    stream: anyio.abc.ByteStream, scope: anyio.CancelScope, read: float, limit: float
) -> bytes:
    """The next bytes, within `read` seconds from now and before `limit` (`scope` is the
    request's)."""
    deadline = anyio.current_time() + read
    scope.deadline = deadline if deadline < limit else limit
    return await stream.receive(_RECEIVE)


def _failure(exc: BaseException, url: str) -> ProviderError | None:
    """The provider error for a failure while a connection was in use (None: not ours)."""
    if isinstance(exc, _NoAnswer):
        cause = exc.__cause__
        how = (
            "the server closed the connection"
            if cause is None or isinstance(cause, anyio.EndOfStream)
            else f"the connection broke ({describe(cause)})"
        )
        return ProviderUnavailable(
            f"connection to {url} failed: {how} after the request was sent and before any "
            "answer. It was not sent again, since the server may have acted on it; the retry "
            "policy decides whether to try again"
        )
    if isinstance(exc, _SendFailed):
        cause = exc.__cause__
        why = describe(cause) if cause is not None else "the connection broke"
        return ProviderUnavailable(f"connection to {url} failed while sending the request: {why}")
    if isinstance(exc, anyio.EndOfStream):
        return ProviderUnavailable(
            f"connection to {url} failed: the server closed the connection before the "
            "response was complete"
        )
    if isinstance(exc, anyio.ClosedResourceError):
        return ProviderUnavailable(f"connection to {url} failed: the transport was closed")
    if isinstance(exc, (_ProtocolError, BodyError)):
        return ProviderUnavailable(f"connection to {url} failed: {exc}")
    if isinstance(exc, (anyio.BrokenResourceError, OSError)):  # OSError: e.g. ssl.SSLError
        return ProviderUnavailable(f"connection to {url} failed: {describe(exc)}")
    return None


def _timed_out(
    url: str, timeouts: Timeouts, limit: float, what: Literal["connect", "read"] = "read"
) -> ProviderTimeout:
    """The timeout that ended a wait: the attempt's total, or `what` (read or connect)."""
    if anyio.current_time() >= limit and timeouts.total is not None:
        return timed_out(url, timeouts, "total")
    return timed_out(url, timeouts, what)


def _fields(headers: Mapping[str, str]) -> bytes:
    """The caller's header lines (ours dropped), refusing what cannot be sent."""
    if not _TOKENS.issuperset(headers):
        _check_names(headers)
    lines = [f"{k}: {v}\r\n" for k, v in headers.items() if k.lower() not in OWN_HEADERS]
    text = "".join(lines)
    if text.count("\n") != len(lines) or text.count("\r") != len(lines) or "\0" in text:
        raise ValueError("a header value holds a line break or NUL")
    return text.encode("latin-1")


def _check_names(headers: Mapping[str, str]) -> None:
    """Refuse a header name that is not a token; remember those that are."""
    for name in headers:
        if name not in _TOKENS:
            if _TOKEN.fullmatch(name) is None:
                raise ValueError(
                    f"the header name {name!r} is not an HTTP field name: an RFC 9110 token "
                    "(letters, digits and !#$%&'*+-.^_`|~), without spaces or colons"
                )
            if len(_TOKENS) >= _MAX_TOKENS:
                _TOKENS.clear()
            _TOKENS.add(name)


def _parse_head(text: str) -> tuple[int, dict[str, str], bool]:
    """Status, headers (lower-case names, repeats joined) and whether to keep the connection."""
    lines = text.split("\r\n")
    status = lines[0]
    code = status[9:12]
    if (
        not status.startswith("HTTP/1.")
        or status[8:9] != " "
        or len(code) != 3
        or not code.isdecimal()
        or status[12:13] not in ("", " ")
    ):
        raise _ProtocolError(f"malformed status line {status[:100]!r}")
    headers: dict[str, str] = {}
    previous = ""  # the last header's name, for folded lines
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name or line[0] in " \t":
            if previous and line[:1] in (" ", "\t"):  # obsolete line folding continues it
                headers[previous] = headers[previous] + " " + line.strip(" \t")
                continue
            raise _ProtocolError(f"malformed header line {line[:100]!r}")
        previous = name = name.lower()
        value = value.strip(" \t")
        if name in headers:
            headers[name] += ", " + value
        else:
            headers[name] = value
    connection = headers.get("connection")
    if connection is None:
        return int(code), headers, status[7] == "1"  # HTTP/1.1 keeps it, HTTP/1.0 closes it
    tokens = connection.lower()
    if status[7] == "1":
        keep = "close" not in tokens
    else:  # HTTP/1.0 closes unless asked to keep the connection
        keep = "keep-alive" in tokens and "close" not in tokens
    return int(code), headers, keep


def _content_length(value: str) -> int:
    """The body's length from a Content-Length value (repeats must agree)."""
    if not (value.isdecimal() and value.isascii()):
        lengths = {v.strip(" \t") for v in value.split(",")}
        if len(lengths) != 1:
            raise _ProtocolError(f"conflicting Content-Length {value!r}")
        value = lengths.pop()
        if not (value.isdecimal() and value.isascii()):
            raise _ProtocolError(f"malformed Content-Length {value!r}")
    n = int(value)
    if n > MAX_BODY_BYTES:
        raise too_large(MAX_BODY_BYTES, n)
    return n


async def _read_head(
    conn: _Connection, scope: anyio.CancelScope, read: float, limit: float
) -> tuple[int, dict[str, str], bool]:
    """The final (non-1xx) response head: status, headers, and whether keep-alive allows
    reuse. The first wait keeps the deadline set before sending."""
    stream = conn.stream
    buf = conn.buffer
    if not buf:
        try:
            data = await stream.receive(_RECEIVE)
        except (anyio.EndOfStream, anyio.BrokenResourceError) as exc:
            raise _NoAnswer from exc
        buf += data
    while True:  # until a final (non-1xx) response head
        start = 0
        while (end := buf.find(b"\r\n\r\n", start)) < 0:
            if len(buf) > MAX_HEADER_BYTES:
                break
            start = max(len(buf) - 3, 0)
            buf += await _receive(stream, scope, read, limit)
        if end < 0 or end > MAX_HEADER_BYTES:
            raise _ProtocolError(
                f"the response headers are larger than the {MAX_HEADER_BYTES >> 10} KiB limit"
            )
        status, headers, keep = _parse_head(buf[:end].decode("latin-1"))
        del buf[: end + 4]
        if status >= 200:
            return status, headers, keep
        if status == 101:
            raise _ProtocolError("the server switched protocols (101), which we never ask")


_NONE, _LENGTH, _CHUNKED, _EOF = range(4)  # how a body is delimited


def _framing(status: int, headers: Mapping[str, str]) -> tuple[int, int]:
    """How the body of a response is delimited, and its length when it has one."""
    if status in _NO_BODY:
        return _NONE, 0
    coding = headers.get("transfer-encoding")
    if coding is not None:
        if coding.strip(" \t").lower() != "chunked":
            raise _ProtocolError(f"unsupported Transfer-Encoding {coding!r}")
        return _CHUNKED, 0
    length = headers.get("content-length")
    if length is not None:
        return _LENGTH, _content_length(length)
    return _EOF, 0


# The phases of a body read piece by piece.
_DATA, _CRLF, _SIZE, _TRAILERS, _END = range(5)


class _BodyReader:
    """One response body, handed out in pieces as its bytes arrive: by Content-Length,
    chunked (chunk framing and trailers read and dropped) or up to EOF.

    Each wait for more bytes moves `scope`'s deadline when the whole exchange runs in
    one scope (`post()`), or runs in a scope of its own (a stream, whose pieces are
    handed out between waits); either way within `read` seconds and before `limit`.
    """

    __slots__ = (
        "buf",
        "chunked",
        "done",
        "eof",
        "left",
        "limit",
        "phase",
        "read",
        "scope",
        "stream",
        "total",
    )

    def __init__(
        self,
        conn: _Connection,
        framing: int,
        length: int,
        read: float,
        limit: float,
        scope: anyio.CancelScope | None,
    ) -> None:
        self.stream = conn.stream
        self.buf = conn.buffer
        self.read = read
        self.limit = limit
        self.scope = scope
        self.chunked = framing == _CHUNKED
        self.eof = framing == _EOF
        self.left = length  # bytes left of the body (by length) or of this chunk
        self.total = 0  # body bytes so far (chunked, EOF)
        if framing == _NONE or (framing == _LENGTH and not length):
            self.phase = _END
        else:
            self.phase = _SIZE if self.chunked else _DATA
        self.done = self.phase == _END and not self.eof

    async def _more(self) -> bytes:
        deadline = anyio.current_time() + self.read
        if deadline > self.limit:
            deadline = self.limit
        scope = self.scope
        if scope is not None:
            scope.deadline = deadline
            return await self.stream.receive(_RECEIVE)
        with anyio.CancelScope(deadline=deadline):
            return await self.stream.receive(_RECEIVE)
        raise _Deadline

    async def next(self) -> bytes:
        """The next piece of the body; b"" once it has ended (then `done` is true)."""
        if self.eof:
            return await self._next_to_eof()
        while True:
            piece = self.step()
            if piece is not None:
                return piece
            self.buf += await self._more()

    async def _next_to_eof(self) -> bytes:
        buf = self.buf
        if not buf:
            try:
                buf += await self._more()
            except anyio.EndOfStream:
                self.done = True
                return b""
        self.total += len(buf)
        if self.total > MAX_BODY_BYTES:
            raise too_large(MAX_BODY_BYTES)
        piece = bytes(buf)
        buf.clear()
        return piece

    def step(self) -> bytes | None:
        """Advance through the bytes already buffered: a piece of the body if there is one,
        b"" at the body's end, None when more bytes are needed."""
        buf = self.buf
        piece: bytes | None = None
        while True:
            phase = self.phase
            if phase == _DATA:
                if piece is not None or not buf:
                    return piece  # one piece at a time
                n = self.left
                if len(buf) <= n:
                    piece = bytes(buf)
                    buf.clear()
                else:
                    piece = bytes(buf[:n])
                    del buf[:n]
                self.left = n = n - len(piece)
                if n:
                    return piece
                self.phase = _CRLF if self.chunked else _END
            elif phase == _SIZE:
                eol = buf.find(b"\r\n")
                if eol < 0:
                    if len(buf) > _MAX_CHUNK_LINE:
                        raise _ProtocolError("a chunk-size line is too long")
                    return piece
                size_text = bytes(buf[:eol]).split(b";", 1)[0].strip(b" \t")
                if not size_text or size_text.strip(_HEX) or len(size_text) > 16:
                    raise _ProtocolError(f"malformed chunk size {bytes(buf[:eol])[:40]!r}")
                size = int(size_text, 16)
                del buf[: eol + 2]
                if size:
                    self.total += size
                    if self.total > MAX_BODY_BYTES:
                        raise too_large(MAX_BODY_BYTES)
                    self.left = size
                    self.phase = _DATA
                else:
                    self.phase = _TRAILERS
            elif phase == _CRLF:
                if len(buf) < 2:
                    return piece
                if buf[:2] != b"\r\n":
                    raise _ProtocolError("a chunk does not end with CRLF")
                del buf[:2]
                self.phase = _SIZE
            elif phase == _TRAILERS:
                # None (a bare CRLF) or header lines up to a blank line; read and dropped.
                if len(buf) < 2:
                    return piece
                if buf[:2] == b"\r\n":
                    del buf[:2]
                else:
                    end = buf.find(b"\r\n\r\n")
                    if end < 0:
                        if len(buf) > MAX_HEADER_BYTES:
                            raise _ProtocolError(
                                f"the trailers are larger than the {MAX_HEADER_BYTES >> 10} KiB "
                                "limit"
                            )
                        return piece
                    del buf[: end + 4]
                self.phase = _END
            else:
                self.done = True
                return b"" if piece is None else piece

    def settle(self) -> bool:
        """Read past what is left of the body in the buffer, without waiting; whether that
        reached its end (a stream left early may then keep its connection)."""
        if self.eof:
            return False
        while not self.done:
            if self.step() is None:
                return False
        return True


class _Streamed(StreamedResponse):
    """A response whose body is read from its connection as the caller asks for it."""

    def __init__(
        self,
        url: str,
        timeouts: Timeouts,
        limit: float,
        status: int,
        headers: Mapping[str, str],
        reader: _BodyReader,
    ) -> None:
        self.status = status
        self.headers = headers
        self.broken = False  # a chunk failed: the connection cannot be reused
        encoding = headers.get("content-encoding")
        self._decoder = decoder_for(encoding, MAX_BODY_BYTES) if encoding is not None else None
        self._reader = reader
        self._url = url
        self._timeouts = timeouts
        self._limit = limit

    def reusable(self) -> bool:
        """Whether the body was read to its end, or what is left of it is in the buffer."""
        if self.broken:
            return False
        try:
            return self._reader.settle()
        except (_ProtocolError, BodyError):
            return False

    async def chunks(self) -> AsyncIterator[bytes]:
        reader = self._reader
        decoder = self._decoder
        while not reader.done:
            try:
                piece = await reader.next()
                if decoder is not None:
                    piece = decoder.feed(piece)
                    if reader.done:
                        decoder.end()
            except _Deadline:
                self.broken = True
                raise _timed_out(self._url, self._timeouts, self._limit) from None
            except Exception as exc:
                self.broken = True
                error = _failure(exc, self._url)
                if error is None:
                    raise
                raise error from exc
            if piece:
                yield piece


class Http11Transport(Transport):
    """Our HTTP/1.1 client on anyio byte streams: keep-alive pools per host, on any backend."""

    def __init__(self, pool_size: int = 100, ssl_context: ssl.SSLContext | None = None) -> None:
        if pool_size < 1:
            raise ValueError(f"pool_size must be at least 1, not {pool_size}")
        self.pool_size = pool_size
        self._ssl_context = ssl_context
        self._pools: dict[tuple[str, str, int, Proxy | None], _HostPool] = {}
        self._targets: dict[str, _Target] = {}
        self._connections: set[_Connection] = set()
        self._closed = False

    @property
    def open_connections(self) -> int:
        """Connections open now, in use and idle, over every host."""
        return len(self._connections)

    # -- the request -------------------------------------------------------------------------

    async def post(
        self, url: str, headers: Mapping[str, str], body: bytes, timeouts: Timeouts
    ) -> HttpResponse:
        """POST `body` to `url` and return the whole response."""
        return await self._whole(url, headers, body, timeouts)

    async def get(self, url: str, headers: Mapping[str, str], timeouts: Timeouts) -> HttpResponse:
        """GET `url` and return the whole response (`Transport.get`): no body, no
        Content-Length; 301, 302, 303, 307 and 308 to the same origin followed.

        Example:
            >>> status = await transport.get(f"{base}/v1/batches/{batch}", auth, Timeouts())
        """
        return await self._whole(url, headers, None, timeouts)

    async def _whole(
        self, url: str, headers: Mapping[str, str], body: bytes | None, timeouts: Timeouts
    ) -> HttpResponse:
        """A POST of `body` (None: a GET) and its whole response, same-origin redirects
        followed."""
        target, fields = self._begin(url, headers)
        limit = math.inf
        hops = 0
        while True:
            request = _request(target, fields, body)
            slots = target.pool.slots
            try:
                slots.acquire_nowait()
            except anyio.WouldBlock:
                await slots.acquire()
            try:
                now = anyio.current_time()
                if not hops and timeouts.total is not None:
                    limit = now + timeouts.total
                response = await self._exchange(target, url, request, timeouts, limit, now)
            finally:
                slots.release()
            status = response.status
            if status < 301 or status > 308:
                if status == 407 and target.proxy is not None and not target.tls:
                    raise proxy_refused(target.proxy, target.authority, status, "")
                return response
            location = same_origin_redirect(
                url, status, response.headers, "GET" if body is None else "POST"
            )
            if location is None or hops == MAX_REDIRECTS:
                return response
            hops += 1
            url = location
            target = self._targets.get(url) or self._target(url)

    def stream(
        self, url: str, headers: Mapping[str, str], body: bytes, timeouts: Timeouts
    ) -> AbstractAsyncContextManager[StreamedResponse]:
        """POST `body` to `url` and hand the response over as it arrives: status and
        headers once the head is read, then the body's bytes as they come."""
        return self._stream(url, headers, body, timeouts)

    @asynccontextmanager
    async def _stream(
        self, url: str, headers: Mapping[str, str], body: bytes, timeouts: Timeouts
    ) -> AsyncIterator[StreamedResponse]:
        target, fields = self._begin(url, headers)
        limit = math.inf
        hops = 0
        while True:
            request = _request(target, fields, body)
            async with target.pool.slots:  # held until the stream's block is left
                if not hops and timeouts.total is not None:
                    limit = anyio.current_time() + timeouts.total
                conn, status, answer, keep = await self._open(target, url, request, timeouts, limit)
                if status == 407 and target.proxy is not None and not target.tls:
                    await self._discard(conn)
                    raise proxy_refused(target.proxy, target.authority, status, "")
                location = (
                    same_origin_redirect(url, status, answer)
                    if status in (307, 308) and hops < MAX_REDIRECTS
                    else None
                )
                if location is None:
                    try:
                        framing, length = _framing(status, answer)
                    except (_ProtocolError, BodyError) as exc:
                        await self._discard(conn)
                        raise ProviderUnavailable(f"connection to {url} failed: {exc}") from None
                    if framing == _EOF or (framing == _CHUNKED and "content-length" in answer):
                        keep = False
                    reader = _BodyReader(conn, framing, length, timeouts.read, limit, None)
                    response = _Streamed(url, timeouts, limit, status, answer, reader)
                    try:
                        yield response
                    finally:
                        await self._release(target, conn, keep and response.reusable())
                    return
                await self._discard(conn)  # a redirect's body is not worth reading
            hops += 1
            url = location
            target = self._targets.get(url) or self._target(url)

    def _begin(self, url: str, headers: Mapping[str, str]) -> tuple[_Target, bytes]:
        """Where a new request to `url` goes, and the caller's header lines for it."""
        if self._closed:
            raise RuntimeError("this Http11Transport is closed")
        return self._targets.get(url) or self._target(url), _fields(headers)

    def _target(self, url: str) -> _Target:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        host = parts.hostname
        if scheme not in _DEFAULT_PORTS or not host:
            raise ValueError(f"Http11Transport takes http:// and https:// URLs, not {url!r}")
        port = parts.port or _DEFAULT_PORTS[scheme]
        authority = f"[{host}]" if ":" in host else host
        if parts.port is not None and parts.port != _DEFAULT_PORTS[scheme]:
            authority += f":{parts.port}"
        path = quote(parts.path or "/", safe="/%:@!$&'()*+,;=-._~")
        if parts.query:
            path += "?" + quote(parts.query, safe="/%:@!$&'()*+,;=-._~?")
        proxy = proxy_for(url)
        if proxy is not None and scheme == "http":  # absolute form, to the proxy
            prefix = f" http://{authority}{path} HTTP/1.1\r\nHost: {authority}\r\n"
            if proxy.authorization is not None:
                prefix += f"Proxy-Authorization: {proxy.authorization}\r\n"
        else:  # direct, or inside a CONNECT tunnel
            prefix = f" {path} HTTP/1.1\r\nHost: {authority}\r\n"
        key = (scheme, host, port, proxy)
        pool = self._pools.get(key)
        if pool is None:
            pool = self._pools[key] = _HostPool(self.pool_size)
        if len(self._targets) >= _MAX_TARGETS:
            self._targets.clear()
        target = _Target(host, port, scheme == "https", prefix.encode("latin-1"), pool, proxy)
        self._targets[url] = target
        return target

    async def _exchange(
        self,
        target: _Target,
        url: str,
        request: tuple[bytes, bytes],
        timeouts: Timeouts,
        limit: float,
        now: float,
    ) -> HttpResponse:
        """One request and its whole response; the connection goes back only if clean.
        `now`: the clock when the caller took its slot (nothing awaited since)."""
        idle = target.pool.idle
        if idle:
            conn = idle.pop()
            poller, tls = conn.poller, conn.ssl_object  # conn.quiet(), inline
            if (poller is not None and poller.poll(0)) or (tls is not None and tls.pending()):
                conn = await self._checkout(target, url, timeouts, limit, conn)
                now = anyio.current_time()
        else:
            conn = await self._connect(target, url, timeouts, limit)
            now = anyio.current_time()
        conn, response, keep = await self._round_trip(
            target, conn, url, request, timeouts, limit, now, True
        )
        if keep and conn.open and not self._closed:  # (nothing is left in the buffer)
            conn.reused = True
            idle.append(conn)
        else:
            await self._discard(conn)
        return response

    async def _open(
        self,
        target: _Target,
        url: str,
        request: tuple[bytes, bytes],
        timeouts: Timeouts,
        limit: float,
    ) -> tuple[_Connection, int, Mapping[str, str], bool]:
        """Send a request and read its answer's head; the connection stays in use."""
        conn = await self._checkout(target, url, timeouts, limit)
        conn, head, keep = await self._round_trip(
            target, conn, url, request, timeouts, limit, anyio.current_time(), False
        )
        return conn, head.status, head.headers, keep

    async def _release(self, target: _Target, conn: _Connection, keep: bool) -> None:
        """Put a connection whose exchange ended back in its pool if it may carry another
        request, else close it."""
        if keep and conn.open and not conn.buffer and not self._closed:
            conn.reused = True
            target.pool.idle.append(conn)
        else:
            conn.buffer.clear()
            await self._discard(conn)

    async def _checkout(
        self,
        target: _Target,
        url: str,
        timeouts: Timeouts,
        limit: float,
        spoilt: _Connection | None = None,
    ) -> _Connection:
        """The most recent idle connection on which nothing is waiting, or a new one
        (`spoilt`: one already taken from the idle ones that failed the check)."""
        if spoilt is not None:
            await self._discard(spoilt)
        idle = target.pool.idle
        while idle:
            conn = idle.pop()
            if conn.quiet():
                return conn
            await self._discard(conn)  # closed by the server, or bytes nobody asked for
        return await self._connect(target, url, timeouts, limit)

    async def _connect(
        self, target: _Target, url: str, timeouts: Timeouts, limit: float
    ) -> _Connection:
        proxy = target.proxy
        via = "" if proxy is None else f" through the proxy {proxy.url}"
        deadline = anyio.current_time() + timeouts.connect
        stream: anyio.abc.ByteStream | None = None
        done = False
        try:
            with anyio.CancelScope(deadline=deadline if deadline < limit else limit):
                if proxy is None:
                    stream = await anyio.connect_tcp(target.host, target.port)
                else:
                    stream = await anyio.connect_tcp(proxy.host, proxy.port)
                    if target.tls:
                        await _tunnel(stream, target, proxy)
                if target.tls:
                    stream = await TLSStream.wrap(
                        stream,
                        hostname=target.host,
                        ssl_context=self._tls(),
                        standard_compatible=False,
                    )
                done = True
        except BaseException as exc:
            if stream is not None:
                await anyio.aclose_forcefully(stream)
            if isinstance(exc, (OSError, anyio.BrokenResourceError, anyio.EndOfStream)):
                error = ProviderUnavailable(f"cannot connect to {url}{via}: {describe(exc)}")
                raise (error if proxy else refusal(error, exc)) from exc
            if isinstance(exc, _ProtocolError):
                raise ProviderUnavailable(f"cannot connect to {url}{via}: {exc}") from None
            raise
        if not done or stream is None:
            if stream is not None:
                await anyio.aclose_forcefully(stream)
            raise _timed_out(url + via, timeouts, limit, "connect")
        if self._closed:  # aclose() ran while we connected
            await anyio.aclose_forcefully(stream)
            raise ProviderUnavailable(f"connection to {url} failed: the transport was closed")
        conn = _Connection(stream)
        self._connections.add(conn)
        return conn

    def _tls(self) -> ssl.SSLContext:
        if self._ssl_context is None:
            self._ssl_context = default_tls()
        return self._ssl_context

    async def _discard(self, conn: _Connection) -> None:
        if conn.open:
            conn.open = False
            self._connections.discard(conn)
            await anyio.aclose_forcefully(conn.stream)

    async def _round_trip(
        self,
        target: _Target,
        conn: _Connection,
        url: str,
        request: tuple[bytes, bytes],
        timeouts: Timeouts,
        limit: float,
        now: float,
        whole: bool,
    ) -> tuple[_Connection, HttpResponse, bool]:
        """One request and its answer (its head only, unless `whole`): the connection that
        carried it, the answer, and whether the connection may carry another. Sent once
        more, on a fresh connection, only if sending failed on a reused one (the server
        never had all of it). Maps failures to provider errors; any failure closes the
        connection. `now`: the clock's time, read just before."""
        read = timeouts.read
        try:
            while True:
                try:
                    # One scope per round trip; each receive after the first moves its deadline.
                    deadline = now + read
                    with anyio.CancelScope(
                        deadline=deadline if deadline < limit else limit
                    ) as scope:
                        data, large = request
                        if large:
                            status, headers, keep = await _send_watching(
                                conn, data, large, scope, read, limit
                            )
                        else:
                            try:
                                await conn.stream.send(data)
                            except anyio.BrokenResourceError as exc:
                                if conn.reused:  # the idle connection died just now: never had it
                                    raise _Unsent from exc
                                status, headers, _ = await _early_answer(
                                    conn, scope, read, limit, exc
                                )
                                keep = False
                            else:
                                status, headers, keep = await _read_head(conn, scope, read, limit)
                        if not whole:
                            return conn, HttpResponse(status, headers, b""), keep
                        buf = conn.buffer
                        length = headers.get("content-length")
                        if (  # the common case: a body by length, all come with the head
                            length is not None
                            and length.isdecimal()
                            and len(buf) == int(length)
                            and status not in _NO_BODY
                            and "transfer-encoding" not in headers
                            and "content-encoding" not in headers
                        ):
                            body = bytes(buf)
                            buf.clear()
                            return conn, HttpResponse(status, headers, body), keep
                        body, keep = await _read_body(
                            conn, status, headers, keep, scope, read, limit
                        )
                        return conn, HttpResponse(status, headers, body), keep
                except _Unsent:  # the server never had all of it: once more, on a fresh one
                    await self._discard(conn)
                    conn = await self._connect(target, url, timeouts, limit)
                    now = anyio.current_time()
                    continue
                except Exception as exc:
                    error = _failure(exc, url)
                    if error is None:
                        raise
                    raise error from exc
                # Only the scope's deadline ends up here.
                raise _timed_out(url, timeouts, limit)
        except BaseException:
            await self._discard(conn)
            raise

    # -- closing -----------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close every connection, idle or in use; requests in flight then fail."""
        self._closed = True
        connections, self._connections = list(self._connections), set()
        for pool in self._pools.values():
            pool.idle.clear()
        for conn in connections:
            conn.open = False
            await anyio.aclose_forcefully(conn.stream)


def _request(target: _Target, fields: bytes, body: bytes | None) -> tuple[bytes, bytes]:
    """The request's bytes: (head and body joined, b"") for a small body, else (head, body);
    a GET's head alone when `body` is None."""
    if body is None:
        return _GET_HEAD % (target.prefix, fields), b""
    head = _HEAD % (
        target.prefix,
        fields,
        len(body),
    )
    return (head + body, b"") if len(body) <= _JOIN_BODY else (head, body)


async def _tunnel(stream: anyio.abc.ByteStream, target: _Target, proxy: Proxy) -> None:
    """Ask `proxy` for a CONNECT tunnel to the target's host and port, on `stream`."""
    authority = target.authority
    request = f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n"
    if proxy.authorization is not None:
        request += f"Proxy-Authorization: {proxy.authorization}\r\n"
    await stream.send((request + "\r\n").encode("latin-1"))
    buf = bytearray()
    while True:  # until a final (non-1xx) answer
        while (end := buf.find(b"\r\n\r\n")) < 0:
            if len(buf) > MAX_HEADER_BYTES:
                raise _ProtocolError(
                    f"the proxy's answer to CONNECT is larger than {MAX_HEADER_BYTES >> 10} KiB"
                )
            try:
                buf += await stream.receive(_RECEIVE)
            except anyio.EndOfStream:
                raise _ProtocolError(
                    "the proxy closed the connection without answering CONNECT"
                ) from None
        head = buf[:end].decode("latin-1")
        status, _, _ = _parse_head(head)
        del buf[: end + 4]
        if status >= 200:
            break
    if 200 <= status < 300:
        if buf:
            raise _ProtocolError("the proxy sent bytes after accepting the tunnel")
        return
    raise proxy_refused(proxy, authority, status, head.split("\r\n", 1)[0][13:])


async def _early_answer(
    conn: _Connection,
    scope: anyio.CancelScope,
    read: float,
    limit: float,
    failure: BaseException,
) -> tuple[int, dict[str, str], bool]:
    """After a failed send: an answer the server had already sent (a 413 before closing),
    if one can be read at once; otherwise `_SendFailed`."""
    with anyio.move_on_after(_EARLY_ANSWER):
        try:
            return await _read_head(conn, scope, read, limit)
        except (_NoAnswer, _ProtocolError, anyio.EndOfStream, anyio.BrokenResourceError):
            pass
    raise _SendFailed from failure


async def _send_watching(
    conn: _Connection,
    head: bytes,
    body: bytes,
    scope: anyio.CancelScope,
    read: float,
    limit: float,
) -> tuple[int, dict[str, str], bool]:
    """Send a large request while reading the answer, which may come before the end (a
    413): then stop sending, and never reuse the connection."""
    stream = conn.stream
    sent = anyio.Event()
    failed: list[BaseException] = []

    async def send() -> None:
        try:
            await stream.send(head)
            await stream.send(body)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            failed.append(exc)
        finally:
            sent.set()

    answer: tuple[int, dict[str, str], bool] | None = None
    error: BaseException | None = None
    early = True
    async with anyio.create_task_group() as tg:
        tg.start_soon(send)
        try:
            answer = await _read_head(conn, scope, read, limit)
        except (_NoAnswer, anyio.EndOfStream, anyio.BrokenResourceError) as exc:
            await sent.wait()  # did the whole request go out? (the connection is dead: soon)
            if not failed:
                error = exc
            elif conn.reused:
                error = _Unsent()
                error.__cause__ = failed[0]
            else:
                error = _SendFailed()
                error.__cause__ = failed[0]
        except Exception as exc:  # raised after the task group, never wrapped in a group
            error = exc
        if answer is not None and not sent.is_set():
            # A sender whose last write is done may not have run since to say so (trio, with
            # a quick server): once it has, only a send still under way makes this early.
            await anyio.lowlevel.checkpoint()
        early = bool(failed) or not sent.is_set()  # answered before all of it had gone
        tg.cancel_scope.cancel()  # done sending, or an early answer: stop
    if error is not None:
        raise error
    assert answer is not None
    return (answer[0], answer[1], False) if early else answer


async def _read_body(
    conn: _Connection,
    status: int,
    headers: dict[str, str],
    keep: bool,
    scope: anyio.CancelScope,
    read: float,
    limit: float,
) -> tuple[bytes, bool]:
    """The whole body of a response whose head was read; also whether the connection may
    carry another request."""
    buf = conn.buffer
    framing, n = _framing(status, headers)
    if framing == _LENGTH:
        stream = conn.stream
        while len(buf) < n:
            buf += await _receive(stream, scope, read, limit)
        if len(buf) == n:
            body = bytes(buf)
            buf.clear()
        else:
            body = bytes(buf[:n])
            del buf[:n]
    elif framing == _NONE:
        body = b""
    else:
        reader = _BodyReader(conn, framing, n, read, limit, scope)
        parts = bytearray()
        while piece := await reader.next():
            parts += piece
        body = bytes(parts)
        if framing == _EOF:
            keep = False
        else:
            keep = keep and "content-length" not in headers
    if buf:  # bytes after the response that no request asked for
        keep = False
        buf.clear()
    encoding = headers.get("content-encoding")
    if encoding is not None and body:
        body = decompress(body, encoding, MAX_BODY_BYTES)
    return body, keep
