"""`Adapter`: what the aiohttp and httpx adapters share, around the one request each
library sends for them (`Adapter._send`).

The rules of our own `Http11Transport`, kept the same way over either library, for a POST
and a GET alike: the caller's Host, Content-Length, Transfer-Encoding, Connection and
Accept-Encoding headers are dropped and gzip and deflate asked for; a GET sends no body
(nor Content-Length); a 307 or 308 to the same origin is followed with the same body, and
for a GET a 301, 302 or 303 too, at most `MAX_REDIRECTS` times (`same_origin_redirect()`),
any other answer coming back as the response; `Timeouts.total` bounds the whole attempt, redirects
and a streamed body included; bodies are decoded by `decoding.Decoder`, within the
adapter's `MAX_BODY_BYTES`, raw or decoded; leaving a stream gives the connection back if
the body was read to its end, else closes it.
"""

from __future__ import annotations

import ssl
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, aclosing, asynccontextmanager
from typing import Any, Literal

import anyio

from .._errors import ProviderError
from .base import (
    MAX_REDIRECTS,
    OWN_HEADERS,
    HttpResponse,
    StreamedResponse,
    Timeouts,
    Transport,
    deadline,
    same_origin_redirect,
    timed_out,
)
from .decoding import ACCEPT_ENCODING, BodyError, Decoder, refused_body, too_large
from .proxies import Proxy, proxy_for
from .tls import default_tls

__all__ = ["Adapter", "Exchange", "Method"]

#: The methods the transports send.
Method = Literal["POST", "GET"]

_MAX_URLS = 1024  # distinct URLs whose proxy we keep


class Exchange(ABC):
    """One request's response as a library handed it over: status and headers read, the
    body still to come."""

    __slots__ = ("encoding", "headers", "status", "url")

    def __init__(self, url: str, status: int, headers: Mapping[str, str]) -> None:
        self.url = url  # the URL that answered
        self.status = status
        self.headers = headers  # lower-cased names
        #: The content codings still to undo (None: the library has undone them).
        self.encoding: str | None = headers.get("content-encoding")

    @abstractmethod
    def raw(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive, still encoded."""

    @abstractmethod
    async def close(self, complete: bool) -> None:
        """Give the connection back if the body was read to its end (`complete`), else
        close it."""


class Adapter(Transport):
    """A transport over an HTTP library: redirects, the total deadline and bodies done
    here, one request (no redirect followed) and its errors by the subclass."""

    def __init__(self) -> None:
        self._proxies: dict[str, Proxy | None] = {}
        self._tls: ssl.SSLContext | None = None
        self._limits: dict[Timeouts, Any] = {}  # the library's timeouts, by ours

    def _limits_for(self, timeouts: Timeouts) -> Any:
        """`_library_timeouts(timeouts)`, made once per `Timeouts`."""
        limits = self._limits.get(timeouts)
        if limits is None:
            limits = self._limits[timeouts] = self._library_timeouts(timeouts)
        return limits

    def _tls_context(self) -> ssl.SSLContext:
        """The default TLS context (`default_tls()`), as it was when first asked for."""
        if self._tls is None:
            self._tls = default_tls()
        return self._tls

    def _proxy(self, url: str) -> Proxy | None:
        """The proxy `proxy_for(url)` names, read when the URL is first seen."""
        proxies = self._proxies
        if url in proxies:
            return proxies[url]
        if len(proxies) >= _MAX_URLS:
            proxies.clear()
        proxy = proxies[url] = proxy_for(url)
        return proxy

    @abstractmethod
    def _library_timeouts(self, timeouts: Timeouts) -> Any:
        """The library's own timeouts for `timeouts.connect` and `timeouts.read`."""

    @abstractmethod
    async def _send(
        self,
        method: Method,
        url: str,
        headers: dict[str, str],
        body: bytes | None,
        timeouts: Timeouts,
    ) -> Exchange:
        """Send `method` to `url` with exactly `headers` and `body` (None: no body, as for a
        GET) and follow no redirect: the response, its status and headers read. Raises
        provider errors only."""

    @abstractmethod
    def _failure(self, url: str, exc: Exception, timeouts: Timeouts) -> ProviderError:
        """The provider error for what the library raised while reading a body (raising
        `exc` again if it is none of the library's)."""

    @abstractmethod
    def _body_limit(self) -> int:
        """The most bytes a body may take, raw or decoded (the module's `MAX_BODY_BYTES`,
        read at each request so that a test may lower it)."""

    # -- the request -------------------------------------------------------------------------

    async def post(
        self, url: str, headers: Mapping[str, str], body: bytes, timeouts: Timeouts
    ) -> HttpResponse:
        """POST `body` to `url` and return the whole response."""
        return await self._whole("POST", url, headers, body, timeouts)

    async def get(self, url: str, headers: Mapping[str, str], timeouts: Timeouts) -> HttpResponse:
        """GET `url` and return the whole response (`Transport.get`): no body, no
        Content-Length; 301, 302, 303, 307 and 308 to the same origin followed.

        Example:
            >>> status = await transport.get(f"{base}/v1/batches/{batch}", auth, Timeouts())
        """
        return await self._whole("GET", url, headers, None, timeouts)

    async def _whole(
        self,
        method: Method,
        url: str,
        headers: Mapping[str, str],
        body: bytes | None,
        timeouts: Timeouts,
    ) -> HttpResponse:
        with anyio.CancelScope(deadline=deadline(timeouts)):
            exchange = await self._open(method, url, headers, body, timeouts)
            complete = False
            try:
                async with aclosing(self._decoded(exchange, timeouts)) as pieces:
                    data = b"".join([piece async for piece in pieces])
                complete = True
            finally:
                await exchange.close(complete)
            return HttpResponse(exchange.status, exchange.headers, data)
        raise timed_out(url, timeouts, "total")

    def stream(
        self, url: str, headers: Mapping[str, str], body: bytes, timeouts: Timeouts
    ) -> AbstractAsyncContextManager[StreamedResponse]:
        """POST `body` to `url` and hand the response over as it arrives."""
        return self._stream(url, headers, body, timeouts)

    @asynccontextmanager
    async def _stream(
        self, url: str, headers: Mapping[str, str], body: bytes, timeouts: Timeouts
    ) -> AsyncIterator[StreamedResponse]:
        limit = deadline(timeouts)
        exchange = None
        with anyio.CancelScope(deadline=limit):
            exchange = await self._open("POST", url, headers, body, timeouts)
        if exchange is None:
            raise timed_out(url, timeouts, "total")
        streamed = _Streamed(self, exchange, timeouts, limit)
        try:
            yield streamed
        finally:
            await exchange.close(streamed.complete)

    async def _open(
        self,
        method: Method,
        url: str,
        headers: Mapping[str, str],
        body: bytes | None,
        timeouts: Timeouts,
    ) -> Exchange:
        """Send the request, following the redirects to the same origin that `method`
        follows."""
        sent = {k: v for k, v in headers.items() if k.lower() not in OWN_HEADERS}
        sent["Accept-Encoding"] = ACCEPT_ENCODING
        for _ in range(MAX_REDIRECTS):
            exchange = await self._send(method, url, sent, body, timeouts)
            target = same_origin_redirect(url, exchange.status, exchange.headers, method)
            if target is None:
                return exchange
            await exchange.close(False)  # a redirect's body is not worth reading
            url = target
        return await self._send(method, url, sent, body, timeouts)

    async def _decoded(self, exchange: Exchange, timeouts: Timeouts) -> AsyncGenerator[bytes, None]:
        """The body's bytes as they arrive, decoded and held to the body limit."""
        limit = self._body_limit()
        try:
            decoder = Decoder(exchange.encoding, limit)
            length = exchange.headers.get("content-length")
            if length is not None and length.isdecimal() and int(length) > limit:
                raise too_large(limit, int(length))
            async for data in exchange.raw():
                if out := decoder.feed(data):
                    yield out
            decoder.end()
        except BodyError as exc:
            raise refused_body(exchange.url, exc) from None
        except Exception as exc:
            raise self._failure(exchange.url, exc, timeouts) from exc


class _Streamed(StreamedResponse):
    """A response whose body is read as the caller asks for it, by the attempt's deadline."""

    def __init__(
        self, transport: Adapter, exchange: Exchange, timeouts: Timeouts, limit: float
    ) -> None:
        self.status = exchange.status
        self.headers = exchange.headers
        self.complete = False  # the body was read to its end
        self._pieces = (transport, exchange, timeouts)
        self._limit = limit

    async def chunks(self) -> AsyncIterator[bytes]:
        transport, exchange, timeouts = self._pieces
        async with aclosing(transport._decoded(exchange, timeouts)) as pieces:
            while True:
                piece = None
                with anyio.CancelScope(deadline=self._limit) as scope:
                    piece = await anext(pieces, None)
                if scope.cancelled_caught:
                    raise timed_out(exchange.url, timeouts, "total")
                if piece is None:
                    self.complete = True
                    return
                yield piece
