"""`AiohttpTransport`: aiohttp's client on asyncio (`VITALS_TRANSPORT=aiohttp`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aiohttp

from .._errors import ProviderTimeout, ProviderUnavailable
from .base import HttpResponse, Timeouts, Transport, lower_headers

__all__ = ["AiohttpTransport"]


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
                return HttpResponse(response.status, lower_headers(response.headers), payload)
        except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
            raise ProviderTimeout(f"no answer from {url} in time ({exc or 'timeout'})") from exc
        except aiohttp.ClientConnectorError as exc:
            raise ProviderUnavailable(f"cannot connect to {url}: {exc.os_error}") from exc
        except aiohttp.ClientError as exc:
            raise ProviderUnavailable(f"connection to {url} failed: {exc}") from exc

    async def aclose(self) -> None:
        await self._session.close()
