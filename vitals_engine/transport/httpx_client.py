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
  transports (`tls.default_tls()`).
- Redirects: never followed by httpx (whatever the client says). A 307 or 308
  to the same origin is followed with the same body, and for a GET a 301, 302
  or 303 too, at most `MAX_REDIRECTS` times (`same_origin_redirect()`); any
  other comes back as the response.
- Timeouts: `connect` for the connection, `read` for sending the request and
  each wait for bytes of the response, `total` for the whole request:
  redirects and, for `stream()`, the streamed body included.
- Bodies: we ask for gzip or deflate and decode them ourselves with
  `decoding.Decoder`, as every transport does, refusing a body over
  `MAX_BODY_BYTES`, raw or decoded.
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
from collections.abc import AsyncGenerator, AsyncIterator
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel

from .._errors import ProviderError, ProviderUnavailable
from .adapter import Adapter, Exchange, Method
from .base import Timeouts, describe, lower_headers, refusal, timed_out
from .decoding import MAX_BODY_BYTES
from .proxies import Proxy, proxy_refused

if TYPE_CHECKING:
    import httpx

__all__ = ["CONNECTIONS_PER_SHARD", "MAX_BODY_BYTES", "MAX_SHARDS", "HttpxTransport"]


#: Connections per httpx client when we shard the pool.
CONNECTIONS_PER_SHARD = 10
#: At most this many httpx clients per proxy route: a larger pool puts more connections on each.
MAX_SHARDS = 64

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


class _Opened(Exchange):
    """An httpx response whose body is still to read, and the shard it holds."""

    __slots__ = ("response", "shard", "shards")

    def __init__(self, response: httpx.Response, url: str, shards: _Shards, shard: int) -> None:
        super().__init__(url, response.status_code, lower_headers(response.headers))
        self.response = response
        self.shards = shards
        self.shard = shard
        if response.is_stream_consumed:  # read already (httpx.MockTransport), and decoded
            self.encoding = None

    def raw(self) -> AsyncIterator[bytes]:
        response = self.response
        return _content(response) if response.is_stream_consumed else response.aiter_raw()

    async def close(self, complete: bool) -> None:
        """Give the shard back; httpx gives the connection back if the body was read to its
        end and closes it otherwise."""
        if self.shard >= 0:
            self.shards.busy[self.shard] -= 1
            self.shard = -1
            await self.response.aclose()


async def _content(response: httpx.Response) -> AsyncGenerator[bytes, None]:
    """The body of a response already read (and decoded), as one piece."""
    if response.content:
        yield response.content


class HttpxTransport(Adapter):
    """httpx on any backend: sharded clients of our own, or the user's client as is."""

    def __init__(self, pool_size: int = 100, client: Any = None) -> None:
        import httpx

        super().__init__()
        self._httpx = httpx
        self._pool_size = pool_size
        self._owned = client is None
        self._shards: dict[Proxy | None, _Shards] = {}
        if client is not None:
            self._shards[None] = _Shards([client])

    # -- one request (Adapter follows redirects and reads bodies) ----------------------------

    def _library_timeouts(self, timeouts: Timeouts) -> httpx.Timeout:
        return self._httpx.Timeout(timeouts.read, connect=timeouts.connect, pool=None)

    async def _send(
        self,
        method: Method,
        url: str,
        headers: dict[str, str],
        body: bytes | None,
        timeouts: Timeouts,
    ) -> Exchange:
        proxy = self._proxy(url) if self._owned else None  # a user's client: its own
        shards = self._shards.get(proxy)
        if shards is None:
            shards = self._shards[proxy] = self._new_shards(proxy)
        shard = shards.take()
        try:
            client = shards.clients[shard]
            request = client.build_request(
                method, url, content=body, headers=headers, timeout=self._limits_for(timeouts)
            )
            response = await client.send(request, stream=True, follow_redirects=False)
        except BaseException as exc:
            shards.busy[shard] -= 1
            if isinstance(exc, Exception):
                raise self._failure(url, exc, timeouts, proxy) from exc
            raise
        opened = _Opened(response, url, shards, shard)
        if proxy is not None and response.status_code == 407:
            await opened.close(False)
            raise proxy_refused(proxy, url, 407, response.reason_phrase)
        return opened

    def _new_shards(self, proxy: Proxy | None) -> _Shards:
        httpx = self._httpx
        shards = min(MAX_SHARDS, max(1, math.ceil(self._pool_size / CONNECTIONS_PER_SHARD)))
        per_shard = max(1, math.ceil(self._pool_size / shards))
        limits = httpx.Limits(max_connections=per_shard, max_keepalive_connections=per_shard)
        tls = self._tls_context()
        via = None
        if proxy is not None:
            auth = {"Proxy-Authorization": proxy.authorization} if proxy.authorization else None
            via = httpx.Proxy(proxy.url, headers=auth)
        clients = []
        for _ in range(shards):
            transport = httpx.AsyncHTTPTransport(
                verify=tls, limits=limits, proxy=via, trust_env=False
            )
            _hear_early_answers(transport)
            clients.append(httpx.AsyncClient(transport=transport, trust_env=False))
        return _Shards(clients)

    def _body_limit(self) -> int:
        return MAX_BODY_BYTES

    def _failure(
        self, url: str, exc: Exception, timeouts: Timeouts, proxy: Proxy | None = None
    ) -> ProviderError:
        """The provider error for what httpx raised."""
        httpx = self._httpx
        if isinstance(exc, ProviderError):
            return exc
        name = type(exc).__name__
        if isinstance(exc, httpx.ConnectTimeout):
            return timed_out(url, timeouts, "connect", name)
        if isinstance(exc, httpx.TimeoutException):  # reading, or sending the request
            return timed_out(url, timeouts, "read", name)
        if isinstance(exc, httpx.ProxyError) and proxy is not None:
            code, _, reason = str(exc).partition(" ")
            if code.isdecimal():
                return proxy_refused(proxy, url, int(code), reason)
            return ProviderUnavailable(
                f"cannot connect to {url} through the proxy {proxy.url}: {exc}"
            )
        if isinstance(exc, httpx.ConnectError):
            via = f" through the proxy {proxy.url}" if proxy is not None else ""
            error = ProviderUnavailable(f"cannot connect to {url}{via}: {describe(exc)}")
            return error if proxy is not None else refusal(error, exc)
        if isinstance(exc, httpx.TransportError):
            return ProviderUnavailable(f"connection to {url} failed: {describe(exc)}")
        raise exc

    async def aclose(self) -> None:
        if self._owned:  # a user's client stays open: it is theirs
            shards, self._shards = list(self._shards.values()), {}
            for shard in shards:
                for client in shard.clients:
                    await client.aclose()


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
        wrote = False
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
                wrote = True
            except Exception as exc:
                failed = exc
            tg.cancel_scope.cancel()
        # An answer heard while a write that then ended whole was yielding (trio, with a quick
        # server) came after the body: the answer, kept for read(), not an early one.
        if self._early and not wrote:
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
