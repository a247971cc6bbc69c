"""The transport seam: POST a JSON body, get status, headers and body back.

Providers never touch an HTTP library; they hand a `Transport` the URL,
headers and encoded body. Three implementations (`pool.py` picks one):

- `Http11Transport` (`http11.py`), the default on asyncio and trio: our own
  HTTP/1.1 client over anyio streams, 0.12-0.2 ms CPU per request.
- `AiohttpTransport`: aiohttp's client on asyncio (`VITALS_TRANSPORT=aiohttp`),
  0.26-0.67 ms CPU per request.
- `HttpxTransport`: used whenever the user hands us an `httpx.AsyncClient`
  (proxies, custom auth), or with `VITALS_TRANSPORT=httpx`. httpx's
  connection pool costs more CPU the more connections it holds, so when we
  own the clients we shard: one `AsyncClient` per ~10 connections, requests
  spread round-robin over them, sharing one TLS context.

A transport raises `ProviderTimeout` for connect/read timeouts and
`ProviderUnavailable` for connections that fail or drop; the provider fills
in its name and model.
"""

from __future__ import annotations

import itertools
import math
import ssl
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from .._errors import ProviderTimeout, ProviderUnavailable

__all__ = [
    "AiohttpTransport",
    "HttpResponse",
    "HttpxTransport",
    "Timeouts",
    "Transport",
]


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Per-attempt limits, in seconds: to connect, and between bytes read."""

    connect: float = 10.0
    read: float = 600.0


@dataclass(frozen=True, slots=True)
class HttpResponse:
    """A response: status, headers (lower-cased names) and the raw body."""

    status: int
    headers: Mapping[str, str]
    body: bytes


class Transport(ABC):
    """Sends JSON POST requests over a pool of connections."""

    @abstractmethod
    async def post(
        self, url: str, headers: Mapping[str, str], body: bytes, timeouts: Timeouts
    ) -> HttpResponse:
        """POST `body` to `url` and return the whole response."""

    @abstractmethod
    async def aclose(self) -> None:
        """Close the pool's connections."""


def _lower(headers: Any) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}


class AiohttpTransport(Transport):
    """aiohttp's client on asyncio: the fast path."""

    def __init__(self, pool_size: int = 100) -> None:
        self._aiohttp = aiohttp
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(
                limit=pool_size, limit_per_host=pool_size, ttl_dns_cache=300
            ),
            auto_decompress=True,
            skip_auto_headers=("User-Agent",),
            cookie_jar=aiohttp.DummyCookieJar(),  # APIs set no cookies we should keep
        )
        self._timeouts: dict[Timeouts, Any] = {}

    async def post(
        self, url: str, headers: Mapping[str, str], body: bytes, timeouts: Timeouts
    ) -> HttpResponse:
        aiohttp = self._aiohttp
        timeout = self._timeouts.get(timeouts)
        if timeout is None:
            timeout = self._timeouts[timeouts] = aiohttp.ClientTimeout(
                total=None, sock_connect=timeouts.connect, sock_read=timeouts.read
            )
        try:
            async with self._session.post(
                url, data=body, headers=headers, timeout=timeout
            ) as response:
                payload = await response.read()
                return HttpResponse(response.status, _lower(response.headers), payload)
        except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
            raise ProviderTimeout(f"no answer from {url} in time ({exc or 'timeout'})") from exc
        except aiohttp.ClientConnectorError as exc:
            raise ProviderUnavailable(f"cannot connect to {url}: {exc.os_error}") from exc
        except aiohttp.ClientError as exc:
            raise ProviderUnavailable(f"connection to {url} failed: {exc}") from exc

    async def aclose(self) -> None:
        await self._session.close()


#: Connections per httpx client when we shard the pool.
CONNECTIONS_PER_SHARD = 10


class HttpxTransport(Transport):
    """httpx on any backend: sharded clients of our own, or the user's client as is."""

    def __init__(self, pool_size: int = 100, client: Any = None) -> None:
        import httpx

        self._httpx = httpx
        self._owned = client is None
        if client is not None:
            self._clients = [client]
        else:
            shards = max(1, math.ceil(pool_size / CONNECTIONS_PER_SHARD))
            per_shard = max(1, math.ceil(pool_size / shards))
            limits = httpx.Limits(max_connections=per_shard, max_keepalive_connections=per_shard)
            tls = ssl.create_default_context()  # shared: making one costs ~60 ms each
            self._clients = [httpx.AsyncClient(limits=limits, verify=tls) for _ in range(shards)]
        self._next = itertools.cycle(self._clients)

    async def post(
        self, url: str, headers: Mapping[str, str], body: bytes, timeouts: Timeouts
    ) -> HttpResponse:
        httpx = self._httpx
        client = next(self._next)
        timeout = httpx.Timeout(timeouts.read, connect=timeouts.connect, pool=None)
        try:
            response = await client.post(url, content=body, headers=dict(headers), timeout=timeout)
            return HttpResponse(response.status_code, _lower(response.headers), response.content)
        except httpx.TimeoutException as exc:
            raise ProviderTimeout(f"no answer from {url} in time ({type(exc).__name__})") from exc
        except httpx.ConnectError as exc:
            raise ProviderUnavailable(f"cannot connect to {url}: {exc}") from exc
        except httpx.TransportError as exc:
            raise ProviderUnavailable(f"connection to {url} failed: {exc!r}") from exc

    async def aclose(self) -> None:
        if self._owned:
            for client in self._clients:
                await client.aclose()
