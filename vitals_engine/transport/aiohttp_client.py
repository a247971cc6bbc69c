"""`AiohttpTransport`: aiohttp's client on asyncio (`VITALS_TRANSPORT=aiohttp`).

It keeps the rules of our own `Http11Transport`, so the transports agree
(`tests/test_transport_conformance.py` runs the same cases against each):

- Proxies: the one `proxy_for()` names for each URL (aiohttp's `trust_env` stays
  off): absolute-form requests for http, CONNECT tunnels for https, the proxy
  URL's credentials as Proxy-Authorization. A proxy that refuses is `proxy_refused`:
  407 an `AuthenticationError`, 5xx `ProviderUnavailable`, naming the proxy.
- TLS: the system's certificates, or those `SSL_CERT_FILE` / `SSL_CERT_DIR`
  name when the first https request is made (aiohttp's own default context is
  made when aiohttp is imported); certifi's where the system has none. One
  context per such setting, shared by the process's transports.
- Redirects: aiohttp follows none (it would turn a POST into a GET on
  301-303). A 307 or 308 to the same origin is followed with the same body, at
  most `MAX_REDIRECTS` times (`same_origin_redirect()`); any other comes back
  as the response.
- Timeouts: `connect` for the connection, `read` for each wait for bytes of the
  response (aiohttp's `sock_read`), `total` for the whole request: redirects
  and, for `stream()`, the streamed body included.
- Bodies: we ask for gzip or deflate and decode them ourselves (aiohttp's own
  decompression has no cap), refusing a body over `MAX_BODY_BYTES` (the same
  limit as http11's), raw or decoded.
- An early answer (a 413 while a large body still goes out) is the response:
  aiohttp reads the answer while it sends the body.
- `stream()` hands the body over as it arrives (`content.readany()`); leaving
  it gives the connection back if the body was read to its end, else closes it.
- Keep-alive: an idle connection on which the server sent something (a 408
  before closing it) is closed, never reused, so those bytes are never taken
  as the next answer.
- Errors: `ProviderTimeout` or `ProviderUnavailable`, saying what happened.
  A POST is never sent twice: aiohttp resends only idempotent requests.
"""

from __future__ import annotations

import os
import select
import ssl
import zlib
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, aclosing, asynccontextmanager
from typing import Any

import aiohttp
import anyio

from .._errors import ProviderError, ProviderTimeout, ProviderUnavailable
from .base import (
    MAX_REDIRECTS,
    HttpResponse,
    StreamedResponse,
    Timeouts,
    Transport,
    lower_headers,
    same_origin_redirect,
)
from .proxies import Proxy, proxy_for, proxy_refused

__all__ = ["MAX_BODY_BYTES", "AiohttpTransport"]

#: The most bytes a response body may take, raw or decompressed (http11's limit).
MAX_BODY_BYTES = 256 * 1024 * 1024

#: Headers the transport writes itself; the caller's are dropped (as http11 does).
_OURS = frozenset(("host", "content-length", "transfer-encoding", "connection", "accept-encoding"))
_ACCEPT_ENCODING = "gzip, deflate"  # what _Decoder undoes
_MAX_URLS = 1024  # distinct URLs whose proxy we keep


class AiohttpTransport(Transport):
    """aiohttp's client on asyncio, with our proxies, redirects, deadline and body limits."""

    def __init__(self, pool_size: int = 100) -> None:
        self._session = aiohttp.ClientSession(
            connector=_Connector(limit=pool_size, limit_per_host=pool_size, ttl_dns_cache=300),
            auto_decompress=False,  # _Decoder does it, within MAX_BODY_BYTES
            skip_auto_headers=("User-Agent",),
            cookie_jar=aiohttp.DummyCookieJar(),  # APIs set no cookies we should keep
        )
        self._timeouts: dict[Timeouts, aiohttp.ClientTimeout] = {}
        self._proxies: dict[str, Proxy | None] = {}
        self._tls: ssl.SSLContext | None = None

    # -- the request -------------------------------------------------------------------------

    async def post(
        self, url: str, headers: Mapping[str, str], body: bytes, timeouts: Timeouts
    ) -> HttpResponse:
        with anyio.CancelScope(deadline=_deadline(timeouts)):
            response, where = await self._open(url, headers, body, timeouts)
            complete = False
            try:
                async with aclosing(_chunks(response, where, timeouts)) as pieces:
                    data = b"".join([chunk async for chunk in pieces])
                complete = True
            finally:
                _done(response, complete)
            return HttpResponse(response.status, lower_headers(response.headers), data)
        raise _total_timeout(url, timeouts)

    def stream(
        self, url: str, headers: Mapping[str, str], body: bytes, timeouts: Timeouts
    ) -> AbstractAsyncContextManager[StreamedResponse]:
        """POST `body` to `url` and hand the response over as it arrives."""
        return self._stream(url, headers, body, timeouts)

    @asynccontextmanager
    async def _stream(
        self, url: str, headers: Mapping[str, str], body: bytes, timeouts: Timeouts
    ) -> AsyncIterator[StreamedResponse]:
        deadline = _deadline(timeouts)
        opened = None
        with anyio.CancelScope(deadline=deadline):
            opened = await self._open(url, headers, body, timeouts)
        if opened is None:
            raise _total_timeout(url, timeouts)
        response, where = opened
        streamed = _Streamed(response, where, timeouts, deadline)
        try:
            yield streamed
        finally:
            _done(response, streamed.complete)

    async def _open(
        self, url: str, headers: Mapping[str, str], body: bytes, timeouts: Timeouts
    ) -> tuple[aiohttp.ClientResponse, str]:
        """Send the request, following same-origin 307/308 redirects: the response, its
        status and headers read, and the URL that gave it."""
        sent = {k: v for k, v in headers.items() if k.lower() not in _OURS}
        sent["Accept-Encoding"] = _ACCEPT_ENCODING
        timeout = self._timeouts.get(timeouts)
        if timeout is None:
            timeout = self._timeouts[timeouts] = aiohttp.ClientTimeout(
                total=None, sock_connect=timeouts.connect, sock_read=timeouts.read
            )
        for _ in range(MAX_REDIRECTS):
            response = await self._send(url, sent, body, timeout, timeouts)
            target = same_origin_redirect(url, response.status, response.headers)
            if target is None:
                return response, url
            response.close()
            url = target
        return await self._send(url, sent, body, timeout, timeouts), url

    async def _send(
        self,
        url: str,
        headers: dict[str, str],
        body: bytes,
        limits: aiohttp.ClientTimeout,
        timeouts: Timeouts,
    ) -> aiohttp.ClientResponse:
        if url in self._proxies:
            proxy = self._proxies[url]
        else:
            if len(self._proxies) >= _MAX_URLS:
                self._proxies.clear()
            proxy = self._proxies[url] = proxy_for(url)
        https = url[:6].lower() == "https:"
        options: dict[str, Any] = {}
        if https:
            options["ssl"] = self._tls_context()
        if proxy is not None:
            options["proxy"] = proxy.url
            if proxy.authorization is not None:
                if https:  # on the CONNECT request only
                    options["proxy_headers"] = {"Proxy-Authorization": proxy.authorization}
                else:  # on each request in absolute form
                    headers = {**headers, "Proxy-Authorization": proxy.authorization}
        try:
            response = await self._session.post(
                url,
                data=body,
                headers=headers,
                timeout=limits,
                allow_redirects=False,
                **options,
            )
        except Exception as exc:
            raise _failure(url, exc, timeouts, proxy) from exc
        if proxy is not None and response.status == 407:
            response.close()
            raise proxy_refused(proxy, url, 407, response.reason or "")
        return response

    def _tls_context(self) -> ssl.SSLContext:
        if self._tls is None:
            self._tls = _default_tls()
        return self._tls

    async def aclose(self) -> None:
        await self._session.close()


#: Default TLS contexts, by the variables that choose their certificates: making one costs
#: ~60-90 ms, so every transport of the process shares it.
_TLS_CONTEXTS: dict[tuple[str | None, str | None], ssl.SSLContext] = {}


def _default_tls() -> ssl.SSLContext:
    """The system's certificates (or those SSL_CERT_FILE / SSL_CERT_DIR name, read as the
    context is made); certifi's where the system has none, as httpx does."""
    key = (os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
    context = _TLS_CONTEXTS.get(key)
    if context is None:
        context = ssl.create_default_context()
        if not context.cert_store_stats().get("x509_ca"):  # a slim container
            import certifi

            context.load_verify_locations(certifi.where())
        context = _TLS_CONTEXTS[key] = context
    return context


class _Connector(aiohttp.TCPConnector):
    """aiohttp's connector, but an idle connection on which the server said something
    (a 408 before closing it, say) is closed, never reused: aiohttp would read those bytes
    as the answer to the next request. (`_get` is aiohttp's own step that takes an idle
    connection from the pool.)"""

    async def _get(self, *args: Any, **kwargs: Any) -> Any:
        while True:
            conn = await super()._get(*args, **kwargs)
            protocol = getattr(conn, "protocol", None)
            if conn is None or protocol is None:
                return conn
            if not (protocol.should_close or _readable(protocol)):
                return conn
            conn.close()


def _readable(protocol: Any) -> bool:
    """Whether bytes (or the end) wait unread on an idle connection's socket."""
    transport = protocol.transport
    sock = transport.get_extra_info("socket") if transport is not None else None
    if sock is None:
        return False
    try:
        if hasattr(select, "poll"):  # not on Windows; select() is, but only for fds < 1024
            poller = select.poll()
            poller.register(sock, select.POLLIN)
            return bool(poller.poll(0))
        return bool(select.select([sock], [], [], 0)[0])
    except (OSError, ValueError):
        return True  # in doubt, a new connection


class _Streamed(StreamedResponse):
    def __init__(
        self,
        response: aiohttp.ClientResponse,
        url: str,
        timeouts: Timeouts,
        deadline: float,
    ) -> None:
        self.status = response.status
        self.headers = lower_headers(response.headers)
        self.complete = False  # the body was read to its end
        self._response = response
        self._url = url
        self._timeouts = timeouts
        self._deadline = deadline

    async def chunks(self) -> AsyncIterator[bytes]:
        async with aclosing(_chunks(self._response, self._url, self._timeouts)) as pieces:
            while True:
                chunk = None
                with anyio.CancelScope(deadline=self._deadline) as scope:
                    chunk = await anext(pieces, None)
                if scope.cancelled_caught:
                    raise _total_timeout(self._url, self._timeouts)
                if chunk is None:
                    self.complete = True
                    return
                yield chunk


async def _chunks(
    response: aiohttp.ClientResponse, url: str, timeouts: Timeouts
) -> AsyncGenerator[bytes, None]:
    """The body's bytes as they arrive, decoded and held to MAX_BODY_BYTES."""
    try:
        decoder = _Decoder(response.headers.get("content-encoding"))
        length = response.content_length
        if length is not None and length > MAX_BODY_BYTES:
            raise _BodyError(
                f"the response body ({length} bytes) is larger than the "
                f"{MAX_BODY_BYTES >> 20} MiB limit"
            )
        content = response.content
        while data := await content.readany():
            if out := decoder.feed(data):
                yield out
        decoder.end()
    except _BodyError as exc:
        raise ProviderUnavailable(f"connection to {url} failed: {exc}") from None
    except Exception as exc:
        raise _failure(url, exc, timeouts, None) from exc


def _done(response: aiohttp.ClientResponse, complete: bool) -> None:
    """Give the connection back if the body was read to its end; close it otherwise."""
    if complete:
        response.release()
    else:
        response.close()


def _deadline(timeouts: Timeouts) -> float:
    return anyio.current_time() + timeouts.total if timeouts.total is not None else float("inf")


def _total_timeout(url: str, timeouts: Timeouts) -> ProviderTimeout:
    return ProviderTimeout(
        f"no complete answer from {url} in time (total timeout of {timeouts.total:g} s)"
    )


def _failure(url: str, exc: Exception, timeouts: Timeouts, proxy: Proxy | None) -> ProviderError:
    """The provider error for what aiohttp (or the socket under it) raised."""
    if isinstance(exc, ProviderError):
        return exc
    if isinstance(exc, aiohttp.ClientHttpProxyError) and proxy is not None:
        return proxy_refused(proxy, url, exc.status, exc.message)
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return ProviderTimeout(
            f"no connection to {url} in time (connect timeout of {timeouts.connect:g} s)"
        )
    if isinstance(exc, TimeoutError):  # aiohttp's timeouts are TimeoutErrors too
        return ProviderTimeout(
            f"no answer from {url} in time (read timeout of {timeouts.read:g} s)"
        )
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return ProviderUnavailable(f"cannot connect to {url}: {exc.certificate_error}")
    if isinstance(exc, aiohttp.ClientProxyConnectionError) and proxy is not None:
        return ProviderUnavailable(
            f"cannot connect to {url} through the proxy {proxy.url}: {exc.os_error}"
        )
    if isinstance(exc, aiohttp.ClientConnectorError):
        return ProviderUnavailable(f"cannot connect to {url}: {exc.os_error}")
    if isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError):
        return ProviderUnavailable(
            f"connection to {url} failed: the server closed the connection before the "
            f"response was complete ({exc})"
        )
    if isinstance(exc, aiohttp.ClientResponseError):  # a response we cannot parse
        return ProviderUnavailable(
            f"connection to {url} failed: malformed response ({exc.message})"
        )
    if isinstance(exc, aiohttp.ClientError | OSError):
        return ProviderUnavailable(f"connection to {url} failed: {type(exc).__name__}: {exc}")
    raise exc


# -- decoding --------------------------------------------------------------------------------
# The same rules as http11's: gzip and deflate (zlib-wrapped or raw) are decoded, any other
# coding is handed over as it came, and neither the raw nor the decoded body may pass
# MAX_BODY_BYTES. (httpx_client.py has the same code: the transports share only base.py.)


class _BodyError(Exception):
    """A body we refuse: the message says why."""


def _too_large() -> _BodyError:
    return _BodyError(f"the response body is larger than the {MAX_BODY_BYTES >> 20} MiB limit")


class _Layer:
    """One content coding undone as its bytes arrive."""

    __slots__ = ("coding", "head", "made", "zlib")

    def __init__(self, coding: str) -> None:
        self.coding = coding
        self.zlib: Any = None
        self.head = b""  # deflate's first byte, until the second tells the wrapping
        self.made = 0  # bytes put out so far

    def feed(self, data: bytes) -> bytes:
        if self.zlib is None:
            if self.coding == "deflate":
                data = self.head + data
                if len(data) < 2:
                    self.head = data
                    return b""
                # RFC 9110 deflate is zlib-wrapped; some servers send raw deflate.
                wrapped = data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0
                self.zlib = zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)
            else:
                self.zlib = zlib.decompressobj(16 + zlib.MAX_WBITS)
        if self.zlib.eof:
            return b""  # bytes after the end of the stream: dropped, as http11 does
        room = MAX_BODY_BYTES - self.made
        try:
            out = self.zlib.decompress(data, room + 1)
        except zlib.error as exc:
            raise _BodyError(f"the {self.coding} body does not decompress ({exc})") from None
        self.made += len(out)
        if self.made > MAX_BODY_BYTES or self.zlib.unconsumed_tail:
            raise _too_large()
        return out

    def end(self) -> None:
        if self.head or (self.zlib is not None and not self.zlib.eof):
            raise _BodyError(f"the {self.coding} body is truncated")


class _Decoder:
    """A response body's content codings undone as it arrives, within MAX_BODY_BYTES."""

    __slots__ = ("layers", "raw")

    def __init__(self, encoding: str | None) -> None:
        self.raw = 0
        self.layers: list[_Layer] = []
        for coding in reversed((encoding or "").lower().split(",")):
            coding = coding.strip()
            if coding in ("gzip", "x-gzip", "deflate"):
                self.layers.append(_Layer("deflate" if coding == "deflate" else "gzip"))
            elif coding not in ("identity", ""):
                break  # not ours to decode: the rest is handed over as it came

    def feed(self, data: bytes) -> bytes:
        self.raw += len(data)
        if self.raw > MAX_BODY_BYTES:
            raise _too_large()
        for layer in self.layers:
            if not data:
                break
            data = layer.feed(data)
        return data

    def end(self) -> None:
        """At the end of the body: a compressed body cut short is an error."""
        for layer in self.layers:
            layer.end()
