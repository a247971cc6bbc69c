"""The transport seam: POST a JSON body, get status, headers and body back.

Providers never touch an HTTP library; they hand a `Transport` the URL,
headers and encoded body. Three implementations, one module each (`pool.py` picks one):

- `Http11Transport` (`http11.py`), the default on asyncio and trio: our own
  HTTP/1.1 client over anyio streams, 0.12-0.2 ms CPU per request.
- `AiohttpTransport` (`aiohttp_client.py`): aiohttp's client on asyncio
  (`VITALS_TRANSPORT=aiohttp`), 0.26-0.67 ms CPU per request.
- `HttpxTransport` (`httpx_client.py`): used whenever the user hands us an
  `httpx.AsyncClient` (proxies, custom auth), or with `VITALS_TRANSPORT=httpx`.

A transport raises `ProviderTimeout` for connect/read timeouts and
`ProviderUnavailable` for connections that fail or drop; the provider fills
in its name and model.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

__all__ = [
    "MAX_REDIRECTS",
    "HttpResponse",
    "StreamedResponse",
    "Timeouts",
    "Transport",
    "lower_headers",
    "same_origin_redirect",
]

#: How many 307/308 redirects to the same server one request follows.
MAX_REDIRECTS = 5


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Per-attempt limits, in seconds: to connect, between bytes (or events) read, and for
    the whole attempt, so a server dripping one byte at a time cannot hold it forever
    (None: no limit).

    Example:
        >>> chat_anthropic(timeouts=Timeouts(read=120, total=3600))  # long reasoning streams
    """

    connect: float = 10.0
    read: float = 600.0
    total: float | None = 1800.0


@dataclass(frozen=True, slots=True)
class HttpResponse:
    """A response: status, headers (lower-cased names) and the raw body."""

    status: int
    headers: Mapping[str, str]
    body: bytes


class StreamedResponse(ABC):
    """A response handed over as it arrives: status and headers first, then the body.

    Example:
        >>> async with transport.stream(url, headers, body, timeouts) as response:
        ...     if response.status >= 400:
        ...         error = await response.read()
        ...     async for chunk in response.chunks():
        ...         ...
    """

    status: int
    headers: Mapping[str, str]  # lower-cased names

    @abstractmethod
    def chunks(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive, decompressed; each wait for more is bounded by
        the read timeout. A body cut short raises `ProviderUnavailable` at the cut."""

    async def read(self) -> bytes:
        """The rest of the body at once (for an error answer)."""
        return b"".join([chunk async for chunk in self.chunks()])


class _Whole(StreamedResponse):
    """A response already read in full, handed over as one chunk."""

    def __init__(self, response: HttpResponse) -> None:
        self.status = response.status
        self.headers = response.headers
        self._body = response.body

    async def chunks(self) -> AsyncIterator[bytes]:
        body, self._body = self._body, b""
        if body:
            yield body


class Transport(ABC):
    """Sends JSON POST requests over a pool of connections."""

    @abstractmethod
    async def post(
        self, url: str, headers: Mapping[str, str], body: bytes, timeouts: Timeouts
    ) -> HttpResponse:
        """POST `body` to `url` and return the whole response."""

    def stream(
        self, url: str, headers: Mapping[str, str], body: bytes, timeouts: Timeouts
    ) -> AbstractAsyncContextManager[StreamedResponse]:
        """POST `body` to `url` and hand the response over as it arrives. Leaving the block
        gives the connection back, or closes it if the body was not read to its end.

        This fallback reads the whole response first; a transport that can do better
        overrides it.
        """
        return _buffered(self, url, headers, body, timeouts)

    @abstractmethod
    async def aclose(self) -> None:
        """Close the pool's connections."""


def lower_headers(headers: Any) -> dict[str, str]:
    """A response's headers as a dict with lower-cased names."""
    return {k.lower(): v for k, v in headers.items()}


@asynccontextmanager
async def _buffered(
    transport: Transport, url: str, headers: Mapping[str, str], body: bytes, timeouts: Timeouts
) -> AsyncIterator[StreamedResponse]:
    yield _Whole(await transport.post(url, headers, body, timeouts))


def same_origin_redirect(url: str, status: int, headers: Mapping[str, str]) -> str | None:
    """Where a 307 or 308 answer to a POST of `url` points, if to the same scheme, host and
    port (so the body and the credentials may go there too); otherwise None: the answer
    is handed over as it is and the provider names the redirect.

    Example:
        >>> same_origin_redirect("https://h/v1/x", 308, {"location": "/v2/x"})
        'https://h/v2/x'
    """
    if status not in (307, 308):
        return None
    location = headers.get("location")
    if not location:
        return None
    target = urljoin(url, location)
    return target if _origin(target) == _origin(url) else None


def _origin(url: str) -> tuple[str, str | None, int | None]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, parts.hostname, parts.port or {"http": 80, "https": 443}.get(scheme)
