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

The client is five modules, one job each: this one (a request from its slot to its
answer: redirects, the round trip, sending once more on a fresh connection, failures
as provider errors), `connection_pool.py` (what a URL resolves to, the pools, opening
and giving back connections, CONNECT tunnels), `request.py` (a request's bytes and
sending them), `response.py` (reading a head and a body) and `connection.py` (one
connection, and how its failures read).
"""

from __future__ import annotations

import math
import ssl
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import anyio

from .._errors import ProviderUnavailable
from .base import (
    MAX_REDIRECTS,
    HttpResponse,
    StreamedResponse,
    Timeouts,
    Transport,
    same_origin_redirect,
)
from .connection import Connection, ProtocolError, Unsent, attempt_timed_out, failure
from .connection_pool import ConnectionPool, Target
from .decoding import BodyError
from .proxies import proxy_refused
from .request import early_answer, header_lines, request_bytes, send_watching
from .response import (
    CHUNKED,
    EOF,
    MAX_BODY_BYTES,
    MAX_HEADER_BYTES,
    NO_BODY,
    BodyReader,
    Streamed,
    body_framing,
    read_body,
    read_head,
)

__all__ = ["MAX_BODY_BYTES", "MAX_HEADER_BYTES", "Http11Transport"]


class Http11Transport(Transport):
    """Our HTTP/1.1 client on anyio byte streams: keep-alive pools per host, on any backend."""

    def __init__(self, pool_size: int = 100, ssl_context: ssl.SSLContext | None = None) -> None:
        if pool_size < 1:
            raise ValueError(f"pool_size must be at least 1, not {pool_size}")
        self.pool_size = pool_size
        self._pool = ConnectionPool(pool_size, ssl_context)

    @property
    def open_connections(self) -> int:
        """Connections open now, in use and idle, over every host."""
        return len(self._pool.connections)

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
            request = request_bytes(target.prefix, fields, body)
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
            target = self._pool.target(url)

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
            request = request_bytes(target.prefix, fields, body)
            async with target.pool.slots:  # held until the stream's block is left
                if not hops and timeouts.total is not None:
                    limit = anyio.current_time() + timeouts.total
                conn, status, answer, keep = await self._open(target, url, request, timeouts, limit)
                if status == 407 and target.proxy is not None and not target.tls:
                    await self._pool.discard(conn)
                    raise proxy_refused(target.proxy, target.authority, status, "")
                location = (
                    same_origin_redirect(url, status, answer)
                    if status in (307, 308) and hops < MAX_REDIRECTS
                    else None
                )
                if location is None:
                    try:
                        framing, length = body_framing(status, answer)
                    except (ProtocolError, BodyError) as exc:
                        await self._pool.discard(conn)
                        raise ProviderUnavailable(f"connection to {url} failed: {exc}") from None
                    if framing == EOF or (framing == CHUNKED and "content-length" in answer):
                        keep = False
                    reader = BodyReader(conn, framing, length, timeouts.read, limit, None)
                    response = Streamed(url, timeouts, limit, status, answer, reader)
                    try:
                        yield response
                    finally:
                        await self._pool.release(target, conn, keep and response.reusable())
                    return
                await self._pool.discard(conn)  # a redirect's body is not worth reading
            hops += 1
            url = location
            target = self._pool.target(url)

    def _begin(self, url: str, headers: Mapping[str, str]) -> tuple[Target, bytes]:
        """Where a new request to `url` goes, and the caller's header lines for it."""
        if self._pool.closed:
            raise RuntimeError("this Http11Transport is closed")
        return self._pool.target(url), header_lines(headers)

    async def _exchange(
        self,
        target: Target,
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
                conn = await self._pool.checkout(target, url, timeouts, limit, conn)
                now = anyio.current_time()
        else:
            conn = await self._pool.connect(target, url, timeouts, limit)
            now = anyio.current_time()
        conn, response, keep = await self._round_trip(
            target, conn, url, request, timeouts, limit, now, True
        )
        if keep and conn.open and not self._pool.closed:  # (nothing is left in the buffer)
            conn.reused = True
            idle.append(conn)
        else:
            await self._pool.discard(conn)
        return response

    async def _open(
        self,
        target: Target,
        url: str,
        request: tuple[bytes, bytes],
        timeouts: Timeouts,
        limit: float,
    ) -> tuple[Connection, int, Mapping[str, str], bool]:
        """Send a request and read its answer's head; the connection stays in use."""
        conn = await self._pool.checkout(target, url, timeouts, limit)
        conn, head, keep = await self._round_trip(
            target, conn, url, request, timeouts, limit, anyio.current_time(), False
        )
        return conn, head.status, head.headers, keep

    async def _round_trip(
        self,
        target: Target,
        conn: Connection,
        url: str,
        request: tuple[bytes, bytes],
        timeouts: Timeouts,
        limit: float,
        now: float,
        whole: bool,
    ) -> tuple[Connection, HttpResponse, bool]:
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
                            status, headers, keep = await send_watching(
                                conn, data, large, scope, read, limit
                            )
                        else:
                            try:
                                await conn.stream.send(data)
                            except anyio.BrokenResourceError as exc:
                                if conn.reused:  # the idle connection died just now: never had it
                                    raise Unsent from exc
                                status, headers, _ = await early_answer(
                                    conn, scope, read, limit, exc
                                )
                                keep = False
                            else:
                                status, headers, keep = await read_head(conn, scope, read, limit)
                        if not whole:
                            return conn, HttpResponse(status, headers, b""), keep
                        buf = conn.buffer
                        length = headers.get("content-length")
                        if (  # the common case: a body by length, all come with the head
                            length is not None
                            and length.isdecimal()
                            and len(buf) == int(length)
                            and status not in NO_BODY
                            and "transfer-encoding" not in headers
                            and "content-encoding" not in headers
                        ):
                            body = bytes(buf)
                            buf.clear()
                            return conn, HttpResponse(status, headers, body), keep
                        body, keep = await read_body(
                            conn, status, headers, keep, scope, read, limit
                        )
                        return conn, HttpResponse(status, headers, body), keep
                except Unsent:  # the server never had all of it: once more, on a fresh one
                    await self._pool.discard(conn)
                    conn = await self._pool.connect(target, url, timeouts, limit)
                    now = anyio.current_time()
                    continue
                except Exception as exc:
                    error = failure(exc, url)
                    if error is None:
                        raise
                    raise error from exc
                # Only the scope's deadline ends up here.
                raise attempt_timed_out(url, timeouts, limit)
        except BaseException:
            await self._pool.discard(conn)
            raise

    # -- closing -----------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close every connection, idle or in use; requests in flight then fail."""
        await self._pool.aclose()
