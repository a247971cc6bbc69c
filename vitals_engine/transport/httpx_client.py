"""`HttpxTransport`: httpx on any backend, with our own clients or the user's.

httpx's connection pool costs more CPU the more connections it holds, so
when we own the clients we shard: one `AsyncClient` per ~10 connections,
made at the first request, each request going to the least busy one (the first
of them when all are idle, so requests made one after another reuse one
connection). A user's own `httpx.AsyncClient` is used as given: its proxies,
auth and TLS settings are its own.

Otherwise it keeps the rules of our own `Http11Transport`, so the transports
agree (`tests/test_transport_conformance.py` runs the same cases against each):

- Proxies (our own clients): the one `proxy_for()` names for each URL, with
  `trust_env=False` so that httpx reads no variable itself: absolute-form
  requests for http, CONNECT tunnels for https, the proxy URL's credentials as
  Proxy-Authorization. One set of shards per proxy. A proxy that refuses is `proxy_refused`:
  407 an `AuthenticationError`, 5xx `ProviderUnavailable`, naming the proxy.
- TLS (our own clients): the system's certificates, or those `SSL_CERT_FILE`
  / `SSL_CERT_DIR` name when the first client is made; certifi's where the
  system has none. One context per such setting, shared by the process's
  transports.
- Redirects: never followed by httpx (whatever the client says). A 307 or 308
  to the same origin is followed with the same body, at most `MAX_REDIRECTS`
  times (`same_origin_redirect()`); any other comes back as the response.
- Timeouts: `connect` for the connection, `read` for sending the request and
  each wait for bytes of the response, `total` for the whole request:
  redirects and, for `stream()`, the streamed body included.
- Bodies: we ask for gzip or deflate and decode them ourselves, refusing a
  body over `MAX_BODY_BYTES` (the same limit as http11's), raw or decoded.
- An early answer (a 413 while a large body still goes out) is the response:
  we listen while sending a large body, where httpx alone reads only after it
  and loses the answer of a server that closed meanwhile.
- `stream()` hands the body over as it arrives (`aiter_raw()`); leaving it
  gives the connection back if the body was read to its end, else closes it.
- Errors: `ProviderTimeout` or `ProviderUnavailable`, saying what happened.
  httpx never sends a request twice.
"""

from __future__ import annotations

import math
import os
import ssl
import zlib
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, aclosing, asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel

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

if TYPE_CHECKING:
    import httpx

__all__ = ["CONNECTIONS_PER_SHARD", "MAX_BODY_BYTES", "HttpxTransport"]


#: Connections per httpx client when we shard the pool.
CONNECTIONS_PER_SHARD = 10
#: The most bytes a response body may take, raw or decompressed (http11's limit).
MAX_BODY_BYTES = 256 * 1024 * 1024

#: Headers the transport writes itself; the caller's are dropped (as http11 does).
_OURS = frozenset(("host", "content-length", "transfer-encoding", "connection", "accept-encoding"))
_ACCEPT_ENCODING = "gzip, deflate"  # what _Decoder undoes
_MAX_URLS = 1024  # distinct URLs whose proxy we keep
_WATCHED_WRITE = 64 * 1024  # larger writes listen for an early answer as they go


class _Shards:
    """httpx clients sharing a pool's connections, and how many requests each is serving."""

    __slots__ = ("busy", "clients")

    def __init__(self, clients: list[httpx.AsyncClient]) -> None:
        self.clients = clients
        self.busy = [0] * len(clients)

    def take(self) -> int:
        """The least busy client (the first of equals), now one request busier."""
        busy = self.busy
        i = busy.index(min(busy))
        busy[i] += 1
        return i


class _Opened:
    """A response whose body is still to read, and the shard it holds."""

    __slots__ = ("response", "shard", "shards", "url")

    def __init__(self, response: httpx.Response, url: str, shards: _Shards, shard: int) -> None:
        self.response = response
        self.url = url
        self.shards = shards
        self.shard = shard

    async def aclose(self) -> None:
        """Give the connection back if the body was read to its end; close it otherwise."""
        if self.shard >= 0:
            self.shards.busy[self.shard] -= 1
            self.shard = -1
            await self.response.aclose()


class HttpxTransport(Transport):
    """httpx on any backend: sharded clients of our own, or the user's client as is."""

    def __init__(self, pool_size: int = 100, client: Any = None) -> None:
        import httpx

        self._httpx = httpx
        self._pool_size = pool_size
        self._owned = client is None
        self._shards: dict[Proxy | None, _Shards] = {}
        if client is not None:
            self._shards[None] = _Shards([client])
        self._proxies: dict[str, Proxy | None] = {}
        self._tls: ssl.SSLContext | None = None

    # -- the request -------------------------------------------------------------------------

    async def post(
        self, url: str, headers: Mapping[str, str], body: bytes, timeouts: Timeouts
    ) -> HttpResponse:
        with anyio.CancelScope(deadline=_deadline(timeouts)):
            opened = await self._open(url, headers, body, timeouts)
            try:
                async with aclosing(self._chunks(opened, timeouts)) as pieces:
                    data = b"".join([chunk async for chunk in pieces])
            finally:
                await opened.aclose()
            response = opened.response
            return HttpResponse(response.status_code, lower_headers(response.headers), data)
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
        try:
            yield _Streamed(self, opened, timeouts, deadline)
        finally:
            await opened.aclose()

    async def _open(
        self, url: str, headers: Mapping[str, str], body: bytes, timeouts: Timeouts
    ) -> _Opened:
        """Send the request, following same-origin 307/308 redirects: the response, its
        status and headers read."""
        sent = {k: v for k, v in headers.items() if k.lower() not in _OURS}
        sent["accept-encoding"] = _ACCEPT_ENCODING
        timeout = self._httpx.Timeout(timeouts.read, connect=timeouts.connect, pool=None)
        for _ in range(MAX_REDIRECTS):
            opened = await self._send(url, sent, body, timeout, timeouts)
            target = same_origin_redirect(url, opened.response.status_code, opened.response.headers)
            if target is None:
                return opened
            await opened.aclose()
            url = target
        return await self._send(url, sent, body, timeout, timeouts)

    async def _send(
        self,
        url: str,
        headers: dict[str, str],
        body: bytes,
        limits: httpx.Timeout,
        timeouts: Timeouts,
    ) -> _Opened:
        proxy: Proxy | None = None
        if self._owned:
            if url in self._proxies:
                proxy = self._proxies[url]
            else:
                if len(self._proxies) >= _MAX_URLS:
                    self._proxies.clear()
                proxy = self._proxies[url] = proxy_for(url)
        shards = self._shards.get(proxy)
        if shards is None:
            shards = self._shards[proxy] = self._new_shards(proxy)
        shard = shards.take()
        try:
            client = shards.clients[shard]
            request = client.build_request(
                "POST", url, content=body, headers=headers, timeout=limits
            )
            response = await client.send(request, stream=True, follow_redirects=False)
        except BaseException as exc:
            shards.busy[shard] -= 1
            if isinstance(exc, Exception):
                raise self._failure(url, exc, timeouts, proxy) from exc
            raise
        opened = _Opened(response, url, shards, shard)
        if proxy is not None and response.status_code == 407:
            await opened.aclose()
            raise proxy_refused(proxy, url, 407, response.reason_phrase)
        return opened

    def _new_shards(self, proxy: Proxy | None) -> _Shards:
        httpx = self._httpx
        shards = max(1, math.ceil(self._pool_size / CONNECTIONS_PER_SHARD))
        per_shard = max(1, math.ceil(self._pool_size / shards))
        limits = httpx.Limits(max_connections=per_shard, max_keepalive_connections=per_shard)
        if self._tls is None:
            self._tls = _default_tls()
        via = None
        if proxy is not None:
            auth = {"Proxy-Authorization": proxy.authorization} if proxy.authorization else None
            via = httpx.Proxy(proxy.url, headers=auth)
        clients = []
        for _ in range(shards):
            transport = httpx.AsyncHTTPTransport(
                verify=self._tls, limits=limits, proxy=via, trust_env=False
            )
            _hear_early_answers(transport)
            clients.append(httpx.AsyncClient(transport=transport, trust_env=False))
        return _Shards(clients)

    async def _chunks(self, opened: _Opened, timeouts: Timeouts) -> AsyncGenerator[bytes, None]:
        """The body's bytes as they arrive, decoded and held to MAX_BODY_BYTES."""
        response, url = opened.response, opened.url
        try:
            if response.is_stream_consumed:  # read already (httpx.MockTransport), decoded
                if len(response.content) > MAX_BODY_BYTES:
                    raise _too_large()
                if response.content:
                    yield response.content
                return
            decoder = _Decoder(response.headers.get("content-encoding"))
            length = response.headers.get("content-length")
            if length is not None and length.isdecimal() and int(length) > MAX_BODY_BYTES:
                raise _BodyError(
                    f"the response body ({length} bytes) is larger than the "
                    f"{MAX_BODY_BYTES >> 20} MiB limit"
                )
            async for data in response.aiter_raw():
                if out := decoder.feed(data):
                    yield out
            decoder.end()
        except _BodyError as exc:
            raise ProviderUnavailable(f"connection to {url} failed: {exc}") from None
        except Exception as exc:
            raise self._failure(url, exc, timeouts, None) from exc

    def _failure(
        self, url: str, exc: Exception, timeouts: Timeouts, proxy: Proxy | None
    ) -> ProviderError:
        """The provider error for what httpx raised."""
        httpx = self._httpx
        if isinstance(exc, ProviderError):
            return exc
        name = type(exc).__name__
        if isinstance(exc, httpx.ConnectTimeout):
            return ProviderTimeout(
                f"no connection to {url} in time (connect timeout of {timeouts.connect:g} s: "
                f"{name})"
            )
        if isinstance(exc, httpx.TimeoutException):  # reading, or sending the request
            return ProviderTimeout(
                f"no answer from {url} in time (read timeout of {timeouts.read:g} s: {name})"
            )
        if isinstance(exc, httpx.ProxyError) and proxy is not None:
            code, _, reason = str(exc).partition(" ")
            if code.isdecimal():
                return proxy_refused(proxy, url, int(code), reason)
            return ProviderUnavailable(
                f"cannot connect to {url} through the proxy {proxy.url}: {exc}"
            )
        if isinstance(exc, httpx.ConnectError):
            via = f" through the proxy {proxy.url}" if proxy is not None else ""
            return ProviderUnavailable(f"cannot connect to {url}{via}: {_describe(exc)}")
        if isinstance(exc, httpx.TransportError):
            return ProviderUnavailable(f"connection to {url} failed: {_describe(exc)}")
        raise exc

    async def aclose(self) -> None:
        if self._owned:  # a user's client stays open: it is theirs
            shards, self._shards = list(self._shards.values()), {}
            for shard in shards:
                for client in shard.clients:
                    await client.aclose()


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


def _hear_early_answers(transport: httpx.AsyncHTTPTransport) -> None:
    """Have `transport`'s connections listen while a large body goes out. httpx alone reads
    only once the body is sent, and a server that answered early and closed has broken
    the connection by then: asyncio drops what was not read yet, a TLS stream on trio is
    broken by the failed send. httpx takes no network backend, so it goes on its pool
    (httpcore's own attribute); a later httpx without it keeps httpx's plain behaviour."""
    pool = getattr(transport, "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if backend is not None:
        pool._network_backend = _EarlyAnswerBackend(backend)  # type: ignore[union-attr]


class _EarlyAnswerBackend:
    """httpcore's network backend, its connections wrapped in `_EarlyAnswerStream`."""

    def __init__(self, backend: Any) -> None:
        self._backend = backend

    async def connect_tcp(self, *args: Any, **kwargs: Any) -> _EarlyAnswerStream:
        return _EarlyAnswerStream(await self._backend.connect_tcp(*args, **kwargs))

    async def connect_unix_socket(self, *args: Any, **kwargs: Any) -> _EarlyAnswerStream:
        return _EarlyAnswerStream(await self._backend.connect_unix_socket(*args, **kwargs))

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)


class _EarlyAnswerStream:
    """An httpcore network stream that reads while it sends a large body: a server that
    answers before the upload ends (a 413) is heard, and httpcore, told the write failed,
    reads that answer."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._early = b""  # an answer read while sending, for the next read()

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        if self._early:
            data, self._early = self._early[:max_bytes], self._early[max_bytes:]
            return data
        return await self._stream.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
        if len(buffer) <= _WATCHED_WRITE:
            await self._stream.write(buffer, timeout)
            return
        failed: Exception | None = None
        async with anyio.create_task_group() as tg:

            async def listen() -> None:
                try:
                    self._early = await self._stream.read(65536)
                except Exception:
                    return  # the write says what went wrong
                if self._early:
                    tg.cancel_scope.cancel()  # answered: stop sending

            tg.start_soon(listen)
            await anyio.lowlevel.checkpoint()  # listening (reading resumed) before sending
            try:
                await self._stream.write(buffer, timeout)
            except Exception as exc:
                failed = exc
            tg.cancel_scope.cancel()
        if self._early:
            import httpcore

            raise httpcore.WriteError("the server answered before the request body was sent")
        if failed is not None:
            raise failed

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def start_tls(self, *args: Any, **kwargs: Any) -> _EarlyAnswerStream:
        return _EarlyAnswerStream(await self._stream.start_tls(*args, **kwargs))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _Streamed(StreamedResponse):
    def __init__(
        self, transport: HttpxTransport, opened: _Opened, timeouts: Timeouts, deadline: float
    ) -> None:
        self.status = opened.response.status_code
        self.headers = lower_headers(opened.response.headers)
        self._transport = transport
        self._opened = opened
        self._timeouts = timeouts
        self._deadline = deadline

    async def chunks(self) -> AsyncIterator[bytes]:
        opened = self._opened
        async with aclosing(self._transport._chunks(opened, self._timeouts)) as pieces:
            while True:
                chunk = None
                with anyio.CancelScope(deadline=self._deadline) as scope:
                    chunk = await anext(pieces, None)
                if scope.cancelled_caught:
                    raise _total_timeout(opened.url, self._timeouts)
                if chunk is None:
                    return
                yield chunk


def _describe(exc: BaseException, depth: int = 0) -> str:
    """What went wrong, with its causes (httpx's wrappers often say little themselves)."""
    cause = exc.__cause__ or exc.__context__
    text = str(exc)
    if not text and cause is not None:
        return _describe(cause, depth)
    text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    if cause is not None and depth < 2 and str(cause) not in text:
        text += f" ({_describe(cause, depth + 1)})"
    return text


def _deadline(timeouts: Timeouts) -> float:
    return anyio.current_time() + timeouts.total if timeouts.total is not None else math.inf


def _total_timeout(url: str, timeouts: Timeouts) -> ProviderTimeout:
    return ProviderTimeout(
        f"no complete answer from {url} in time (total timeout of {timeouts.total:g} s)"
    )


# -- decoding --------------------------------------------------------------------------------
# The same rules as http11's: gzip and deflate (zlib-wrapped or raw) are decoded, any other
# coding is handed over as it came, and neither the raw nor the decoded body may pass
# MAX_BODY_BYTES. (aiohttp_client.py has the same code: the transports share only base.py.)


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
