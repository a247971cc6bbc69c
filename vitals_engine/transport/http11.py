"""`Http11Transport`: a minimal HTTP/1.1 client of our own over anyio byte streams.

It runs wherever anyio runs (asyncio, uvloop, trio) and costs a small
fraction of what aiohttp or httpx cost per request, because it does only
what the providers need: POST a body, read the whole response.

Invariants:

- A connection goes back to the pool only after its response was read
  completely, to the last byte of the body (and the trailers of a chunked
  body), with nothing left over, and only if the response allows keep-alive.
  A request that fails, times out or is cancelled while its connection is in
  use closes that connection; it is never returned half-read.
- At most `pool_size` connections are open per (scheme, host, port), in use
  and idle together: a request holds one of `pool_size` slots from before it
  takes a connection until after it gave the connection back or closed it,
  and a connection is opened only when no idle one is left. Requests beyond
  that wait for a slot. Idle connections are reused last-in, first-out.
- A request is sent twice at most: once more, on a fresh connection, when the
  reused idle connection it first tried turns out to be closed by the server
  (EOF or reset when sending, or EOF or reset before any byte of a response).
  Any other failure is final.
- Response limits: a header block of at most 64 KiB and a body (after
  decompression) of at most 256 MiB; beyond them the request fails.
- Timeouts: `Timeouts.connect` bounds the TCP connect and the TLS handshake;
  `Timeouts.read` bounds sending the request and then each wait for more
  bytes of the response (one cancel scope per request whose deadline moves).

Responses: `Content-Length`, `Transfer-Encoding: chunked` (trailers are read
and dropped) or, with neither, read to EOF (that connection is then not
reused); `Connection: close` is honoured, 1xx responses are skipped; gzip
and deflate bodies are decompressed. No proxies, no HTTP/2; users who need a
proxy pass their own httpx client, which `HttpxTransport` serves.
"""

from __future__ import annotations

import ssl
import zlib
from collections.abc import Mapping
from urllib.parse import quote, urlsplit

import anyio
import anyio.abc

from .._errors import ProviderTimeout, ProviderUnavailable
from .base import HttpResponse, Timeouts, Transport

__all__ = ["MAX_BODY_BYTES", "MAX_HEADER_BYTES", "Http11Transport"]

#: Bodies up to this size go out in one write with their head.
_ONE_SEND = 64 * 1024
#: The most bytes a response's status line and headers may take.
MAX_HEADER_BYTES = 64 * 1024
#: The most bytes a response body may take, after decompression.
MAX_BODY_BYTES = 256 * 1024 * 1024

_RECEIVE = 65536  # bytes asked of each receive()
_JOIN_BODY = 65536  # bodies up to this size go out in the same write as the head
_MAX_CHUNK_LINE = 4096  # a chunk-size line, extensions included
_HEX = b"0123456789abcdefABCDEF"
_NO_BODY = frozenset((204, 304))
#: Headers the transport writes itself; the caller's are dropped.
_OURS = frozenset(("host", "content-length", "transfer-encoding", "connection", "accept-encoding"))
_DEFAULT_PORTS = {"http": 80, "https": 443}
_MAX_TARGETS = 1024  # distinct URLs whose request line we keep


class _ProtocolError(Exception):
    """The server broke HTTP/1.1, or a limit: the message says how."""


class _Stale(Exception):
    """A reused idle connection the server had already closed."""


class _Connection:
    """One keep-alive connection: its stream and the bytes read but not yet parsed."""

    __slots__ = ("buffer", "open", "reused", "stream")

    def __init__(self, stream: anyio.abc.ByteStream) -> None:
        self.stream = stream
        self.buffer = bytearray()
        self.open = True
        self.reused = False  # True once it carried a whole response


class _HostPool:
    """The connections to one (scheme, host, port): idle ones and the slots to use one."""

    __slots__ = ("idle", "slots")

    def __init__(self, size: int) -> None:
        self.slots = anyio.Semaphore(size)
        self.idle: list[_Connection] = []


class _Target:
    """What a URL resolves to: where to connect and the start of each request."""

    __slots__ = ("host", "pool", "port", "prefix", "tls")

    def __init__(self, host: str, port: int, tls: bool, prefix: bytes, pool: _HostPool) -> None:
        self.host = host
        self.port = port
        self.tls = tls
        self.prefix = prefix
        self.pool = pool


async def _receive(stream: anyio.abc.ByteStream, scope: anyio.CancelScope, read: float) -> bytes:
    """The next bytes, within `read` seconds from now (`scope` is the request's)."""
    scope.deadline = anyio.current_time() + read
    return await stream.receive(_RECEIVE)


def _describe(exc: BaseException, depth: int = 0) -> str:
    """What went wrong, with its causes (anyio's wrappers say little themselves)."""
    cause = exc.__cause__
    text = str(exc)
    if not text and cause is not None:  # e.g. BrokenResourceError from ConnectionResetError
        return _describe(cause, depth)
    text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    if cause is not None and depth < 2:
        text += f" ({_describe(cause, depth + 1)})"
    return text


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
        raise _ProtocolError(
            f"the response body ({n} bytes) is larger than the {MAX_BODY_BYTES >> 20} MiB limit"
        )
    return n


def _too_large() -> _ProtocolError:
    return _ProtocolError(f"the response body is larger than the {MAX_BODY_BYTES >> 20} MiB limit")


def _decompress(body: bytes, encoding: str) -> bytes:
    """Undo the content codings we asked for (gzip, deflate); leave any other body as is."""
    for coding in reversed(encoding.lower().split(",")):
        coding = coding.strip()
        if coding in ("gzip", "x-gzip"):
            decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif coding == "deflate":
            # RFC 9110 deflate is zlib-wrapped; some servers send raw deflate.
            wrapped = len(body) > 1 and body[0] & 0x0F == 8 and (body[0] << 8 | body[1]) % 31 == 0
            decoder = zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)
        elif coding in ("identity", ""):
            continue
        else:
            return body  # not ours to decode: hand it over as it came
        try:
            out = decoder.decompress(body, MAX_BODY_BYTES + 1)
        except zlib.error as exc:
            raise _ProtocolError(f"the {coding} body does not decompress ({exc})") from None
        if len(out) > MAX_BODY_BYTES or decoder.unconsumed_tail:
            raise _too_large()
        if not decoder.eof:
            raise _ProtocolError(f"the {coding} body is truncated")
        body = out
    return body


class Http11Transport(Transport):
    """Our HTTP/1.1 client on anyio byte streams: keep-alive pools per host, on any backend."""

    def __init__(self, pool_size: int = 100, ssl_context: ssl.SSLContext | None = None) -> None:
        if pool_size < 1:
            raise ValueError(f"pool_size must be at least 1, not {pool_size}")
        self.pool_size = pool_size
        self._ssl_context = ssl_context
        self._pools: dict[tuple[str, str, int], _HostPool] = {}
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
        if self._closed:
            raise RuntimeError("this Http11Transport is closed")
        target = self._targets.get(url)
        if target is None:
            target = self._target(url)
        lines = [f"{k}: {v}\r\n" for k, v in headers.items() if k.lower() not in _OURS]
        text = "".join(lines)
        if text.count("\n") != len(lines) or text.count("\r") != len(lines) or "\0" in text:
            raise ValueError("a header name or value holds a line break or NUL")
        head = b"%b%bContent-Length: %d\r\nAccept-Encoding: gzip, deflate\r\n\r\n" % (
            target.prefix,
            text.encode("latin-1"),
            len(body),
        )
        request = (head + body, b"") if len(body) <= _JOIN_BODY else (head, body)
        slots = target.pool.slots
        try:
            slots.acquire_nowait()
        except anyio.WouldBlock:
            await slots.acquire()
        try:
            return await self._exchange(target, url, request, timeouts)
        finally:
            slots.release()

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
        prefix = f"POST {path} HTTP/1.1\r\nHost: {authority}\r\n".encode("ascii")
        key = (scheme, host, port)
        pool = self._pools.get(key)
        if pool is None:
            pool = self._pools[key] = _HostPool(self.pool_size)
        if len(self._targets) >= _MAX_TARGETS:
            self._targets.clear()
        target = self._targets[url] = _Target(host, port, scheme == "https", prefix, pool)
        return target

    async def _exchange(
        self, target: _Target, url: str, request: tuple[bytes, bytes], timeouts: Timeouts
    ) -> HttpResponse:
        """Send on an idle connection or a new one; put it back only if it is clean."""
        idle = target.pool.idle
        conn = idle.pop() if idle else await self._connect(target, url, timeouts.connect)
        try:
            try:
                response, reusable = await self._round_trip(conn, url, request, timeouts.read)
            except _Stale:
                await self._discard(conn)
                conn = await self._connect(target, url, timeouts.connect)
                response, reusable = await self._round_trip(conn, url, request, timeouts.read)
        except BaseException:
            await self._discard(conn)
            raise
        if reusable and not self._closed:
            conn.reused = True
            idle.append(conn)
        else:
            await self._discard(conn)
        return response

    async def _connect(self, target: _Target, url: str, seconds: float) -> _Connection:
        try:
            with anyio.fail_after(seconds):
                if target.tls:
                    stream: anyio.abc.ByteStream = await anyio.connect_tcp(
                        target.host,
                        target.port,
                        tls=True,
                        ssl_context=self._tls(),
                        tls_standard_compatible=False,
                        tls_hostname=target.host,
                    )
                else:
                    stream = await anyio.connect_tcp(target.host, target.port)
        except TimeoutError:
            raise ProviderTimeout(
                f"no connection to {url} in time (connect timeout of {seconds:g} s)"
            ) from None
        except (OSError, anyio.BrokenResourceError, anyio.EndOfStream) as exc:
            raise ProviderUnavailable(f"cannot connect to {url}: {_describe(exc)}") from exc
        if self._closed:  # aclose() ran while we connected
            await anyio.aclose_forcefully(stream)
            raise ProviderUnavailable(f"connection to {url} failed: the transport was closed")
        conn = _Connection(stream)
        self._connections.add(conn)
        return conn

    def _tls(self) -> ssl.SSLContext:
        if self._ssl_context is None:
            context = ssl.create_default_context()
            if not context.cert_store_stats().get("x509_ca"):
                # No system certificates (a slim container): use certifi's, as httpx does.
                import certifi

                context.load_verify_locations(certifi.where())
            context.set_alpn_protocols(["http/1.1"])
            self._ssl_context = context
        return self._ssl_context

    async def _discard(self, conn: _Connection) -> None:
        if conn.open:
            conn.open = False
            self._connections.discard(conn)
            await anyio.aclose_forcefully(conn.stream)

    async def _round_trip(
        self, conn: _Connection, url: str, request: tuple[bytes, bytes], read: float
    ) -> tuple[HttpResponse, bool]:
        """One request and its response on `conn`, mapping failures to provider errors."""
        stream = conn.stream
        try:
            # One scope per round trip; each receive after the first moves its deadline.
            with anyio.CancelScope(deadline=anyio.current_time() + read) as scope:
                try:
                    head, body = request
                    if len(body) <= _ONE_SEND:  # one write, one syscall: the common case
                        await stream.send(head + body)
                    else:
                        await stream.send(head)
                        await stream.send(body)
                except anyio.BrokenResourceError as exc:
                    if conn.reused:
                        raise _Stale from exc  # the send found the connection closed
                    raise
                return await self._read_response(conn, scope, read)
        except _Stale:
            raise
        except (anyio.BrokenResourceError, anyio.EndOfStream) as exc:
            why = (
                "the server closed the connection before the response was complete"
                if isinstance(exc, anyio.EndOfStream)
                else _describe(exc)
            )
            raise ProviderUnavailable(f"connection to {url} failed: {why}") from exc
        except anyio.ClosedResourceError as exc:
            raise ProviderUnavailable(
                f"connection to {url} failed: the transport was closed"
            ) from exc
        except _ProtocolError as exc:
            raise ProviderUnavailable(f"connection to {url} failed: {exc}") from None
        except OSError as exc:  # e.g. ssl.SSLError from a TLS stream
            raise ProviderUnavailable(f"connection to {url} failed: {_describe(exc)}") from exc
        # Only the scope's deadline ends up here.
        raise ProviderTimeout(f"no answer from {url} in time (read timeout of {read:g} s)")

    async def _read_response(
        self, conn: _Connection, scope: anyio.CancelScope, read: float
    ) -> tuple[HttpResponse, bool]:
        """Read one whole response; also say whether the connection may carry another."""
        stream = conn.stream
        buf = conn.buffer
        try:
            data = await stream.receive(_RECEIVE)  # the deadline set before sending holds
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            if conn.reused:
                raise _Stale from None  # closed while idle: no byte of a response came
            raise
        buf += data
        while True:  # until a final (non-1xx) response head
            start = 0
            while (end := buf.find(b"\r\n\r\n", start)) < 0:
                if len(buf) > MAX_HEADER_BYTES:
                    break
                start = max(len(buf) - 3, 0)
                buf += await _receive(stream, scope, read)
            if end < 0 or end > MAX_HEADER_BYTES:
                raise _ProtocolError(
                    f"the response headers are larger than the {MAX_HEADER_BYTES >> 10} KiB limit"
                )
            status, headers, keep = _parse_head(buf[:end].decode("latin-1"))
            del buf[: end + 4]
            if status >= 200:
                break
            if status == 101:
                raise _ProtocolError("the server switched protocols (101), which we never ask")

        if status in _NO_BODY:
            body = b""
        elif (coding := headers.get("transfer-encoding")) is not None:
            if coding.strip(" \t").lower() != "chunked":
                raise _ProtocolError(f"unsupported Transfer-Encoding {coding!r}")
            body = await self._read_chunked(stream, buf, scope, read)
            keep = keep and "content-length" not in headers
        elif (length := headers.get("content-length")) is not None:
            n = _content_length(length)
            while len(buf) < n:
                buf += await _receive(stream, scope, read)
            if len(buf) == n:
                body = bytes(buf)
                buf.clear()
            else:
                body = bytes(buf[:n])
                del buf[:n]
        else:  # neither: the body ends where the connection does
            keep = False
            try:
                while len(buf) <= MAX_BODY_BYTES:
                    buf += await _receive(stream, scope, read)
            except anyio.EndOfStream:
                pass
            if len(buf) > MAX_BODY_BYTES:
                raise _too_large()
            body = bytes(buf)
            buf.clear()

        if buf:  # bytes after the response that no request asked for
            keep = False
            buf.clear()
        encoding = headers.get("content-encoding")
        if encoding is not None and body:
            body = _decompress(body, encoding)
        return HttpResponse(status, headers, body), keep

    @staticmethod
    async def _read_chunked(
        stream: anyio.abc.ByteStream, buf: bytearray, scope: anyio.CancelScope, read: float
    ) -> bytes:
        body = bytearray()
        pos = 0  # where the next chunk-size line starts in buf
        while True:
            while (eol := buf.find(b"\r\n", pos)) < 0:
                if len(buf) - pos > _MAX_CHUNK_LINE:
                    raise _ProtocolError("a chunk-size line is too long")
                buf += await _receive(stream, scope, read)
            size_text = bytes(buf[pos:eol]).split(b";", 1)[0].strip(b" \t")
            if not size_text or size_text.strip(_HEX) or len(size_text) > 16:
                raise _ProtocolError(f"malformed chunk size {bytes(buf[pos:eol])[:40]!r}")
            size = int(size_text, 16)
            pos = eol + 2
            if size == 0:
                break
            if len(body) + size > MAX_BODY_BYTES:
                raise _too_large()
            if pos > _RECEIVE:  # drop what was parsed, so the buffer stays short
                del buf[:pos]
                pos = 0
            end = pos + size
            while len(buf) < end + 2:
                buf += await _receive(stream, scope, read)
            if buf[end : end + 2] != b"\r\n":
                raise _ProtocolError("a chunk does not end with CRLF")
            body += buf[pos:end]
            pos = end + 2
        del buf[:pos]
        # Trailers: none (a bare CRLF) or header lines up to a blank line; read and dropped.
        while len(buf) < 2:
            buf += await _receive(stream, scope, read)
        if buf[:2] == b"\r\n":
            del buf[:2]
        else:
            while (end := buf.find(b"\r\n\r\n")) < 0:
                if len(buf) > MAX_HEADER_BYTES:
                    raise _ProtocolError(
                        f"the trailers are larger than the {MAX_HEADER_BYTES >> 10} KiB limit"
                    )
                buf += await _receive(stream, scope, read)
            del buf[: end + 4]
        return bytes(body)

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
