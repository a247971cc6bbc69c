"""`AiohttpTransport`: aiohttp's client on asyncio (`VITALS_TRANSPORT=aiohttp`).

It keeps the rules of our own `Http11Transport`, so the transports agree
(`tests/test_transport_conformance.py` runs the same cases against each); what
it shares with the httpx adapter (redirects, the total deadline, bodies) is
`adapter.Adapter`'s:

- Proxies: the one `proxy_for()` names for each URL (aiohttp's `trust_env` stays
  off): absolute-form requests for http, CONNECT tunnels for https, the proxy
  URL's credentials as Proxy-Authorization. A proxy that refuses is `proxy_refused`:
  407 an `AuthenticationError`, 5xx `ProviderUnavailable`, naming the proxy.
- TLS: the system's certificates, or those `SSL_CERT_FILE` / `SSL_CERT_DIR`
  name when the first https request is made (aiohttp's own default context is
  made when aiohttp is imported); certifi's where the system has none. One
  context per such setting, shared by the process's transports (`tls.default_tls()`).
- Redirects: aiohttp follows none (it would turn a POST into a GET on
  301-303). A 307 or 308 to the same origin is followed with the same body,
  and for a GET a 301, 302 or 303 too, at most `MAX_REDIRECTS` times
  (`same_origin_redirect()`); any other comes back as the response.
- Timeouts: `connect` for the connection, `read` for each wait for bytes of the
  response (aiohttp's `sock_read`), `total` for the whole request: redirects
  and, for `stream()`, the streamed body included.
- Bodies: we ask for gzip or deflate and decode them ourselves with
  `decoding.Decoder`, as every transport does (aiohttp's own decompression has
  no cap), refusing a body over `MAX_BODY_BYTES`, raw or decoded.
- An early answer (a 413 while a large body still goes out) is the response:
  aiohttp reads the answer while it sends the body.
- `stream()` hands the body over as it arrives (`content.readany()`); leaving
  it gives the connection back if the body was read to its end, else closes it.
- Keep-alive: an idle connection on which the server sent something (a 408
  before closing it) is closed, never reused, so those bytes are never taken
  as the next answer.
- Errors: `ProviderTimeout` or `ProviderUnavailable`, saying what happened.
  A POST is never sent twice: aiohttp resends only idempotent requests (a GET
  once, when its connection drops before an answer, as RFC 9112 9.3.1 allows;
  the other transports leave that to the engine's retry policy).
"""

from __future__ import annotations

import select
from collections.abc import AsyncIterator
from typing import Any

import aiohttp

from .._errors import ProviderError, ProviderUnavailable
from .adapter import Adapter, Exchange, Method
from .base import Timeouts, lower_headers, refusal, timed_out
from .decoding import MAX_BODY_BYTES
from .proxies import Proxy, proxy_refused

__all__ = ["MAX_BODY_BYTES", "AiohttpTransport"]


class AiohttpTransport(Adapter):
    """aiohttp's client on asyncio, with our proxies, redirects, deadline and body limits."""

    def __init__(self, pool_size: int = 100) -> None:
        super().__init__()
        self._session = aiohttp.ClientSession(
            connector=_Connector(limit=pool_size, limit_per_host=pool_size, ttl_dns_cache=300),
            auto_decompress=False,  # Decoder does it, within MAX_BODY_BYTES
            skip_auto_headers=("User-Agent",),
            cookie_jar=aiohttp.DummyCookieJar(),  # APIs set no cookies we should keep
        )

    # -- one request (Adapter follows redirects and reads bodies) ----------------------------

    def _library_timeouts(self, timeouts: Timeouts) -> aiohttp.ClientTimeout:
        return aiohttp.ClientTimeout(
            total=None, sock_connect=timeouts.connect, sock_read=timeouts.read
        )

    async def _send(
        self,
        method: Method,
        url: str,
        headers: dict[str, str],
        body: bytes | None,
        timeouts: Timeouts,
    ) -> Exchange:
        proxy = self._proxy(url)
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
            response = await self._session.request(
                method,
                url,
                data=body,
                headers=headers,
                timeout=self._limits_for(timeouts),
                allow_redirects=False,
                **options,
            )
        except Exception as exc:
            raise _failure(url, exc, timeouts, proxy) from exc
        if proxy is not None and response.status == 407:
            response.close()
            raise proxy_refused(proxy, url, 407, response.reason or "")
        return _Exchange(url, response)

    def _failure(self, url: str, exc: Exception, timeouts: Timeouts) -> ProviderError:
        return _failure(url, exc, timeouts, None)

    def _body_limit(self) -> int:
        return MAX_BODY_BYTES

    async def aclose(self) -> None:
        await self._session.close()


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


class _Exchange(Exchange):
    """An aiohttp response, its body still to read."""

    __slots__ = ("response",)

    def __init__(self, url: str, response: aiohttp.ClientResponse) -> None:
        super().__init__(url, response.status, lower_headers(response.headers))
        self.response = response

    def raw(self) -> AsyncIterator[bytes]:
        return self.response.content.iter_any()  # readany() until the end

    async def close(self, complete: bool) -> None:
        if complete:
            self.response.release()
        else:
            self.response.close()


def _failure(url: str, exc: Exception, timeouts: Timeouts, proxy: Proxy | None) -> ProviderError:
    """The provider error for what aiohttp (or the socket under it) raised."""
    if isinstance(exc, ProviderError):
        return exc
    if isinstance(exc, aiohttp.ClientHttpProxyError) and proxy is not None:
        return proxy_refused(proxy, url, exc.status, exc.message)
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return timed_out(url, timeouts, "connect")
    if isinstance(exc, TimeoutError):  # aiohttp's timeouts are TimeoutErrors too
        return timed_out(url, timeouts, "read")
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return ProviderUnavailable(f"cannot connect to {url}: {exc.certificate_error}")
    if isinstance(exc, aiohttp.ClientProxyConnectionError) and proxy is not None:
        return ProviderUnavailable(
            f"cannot connect to {url} through the proxy {proxy.url}: {exc.os_error}"
        )
    if isinstance(exc, aiohttp.ClientConnectorError):
        error = ProviderUnavailable(f"cannot connect to {url}: {exc.os_error}")
        return error if isinstance(exc, aiohttp.ClientProxyConnectionError) else refusal(error, exc)
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
