"""`HttpxTransport`: httpx on any backend, with our own clients or the user's.

httpx's connection pool costs more CPU the more connections it holds, so
when we own the clients we shard: one `AsyncClient` per ~10 connections,
requests spread round-robin over them, sharing one TLS context. A user's
own `httpx.AsyncClient` (proxies, custom auth) is used as given.
"""

from __future__ import annotations

import itertools
import math
import ssl
from collections.abc import Mapping
from typing import Any

from .._errors import ProviderTimeout, ProviderUnavailable
from .base import HttpResponse, Timeouts, Transport, lower_headers

__all__ = ["CONNECTIONS_PER_SHARD", "HttpxTransport"]


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
            return HttpResponse(
                response.status_code, lower_headers(response.headers), response.content
            )
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
