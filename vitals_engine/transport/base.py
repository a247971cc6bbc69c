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
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["HttpResponse", "Timeouts", "Transport", "lower_headers"]


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


def lower_headers(headers: Any) -> dict[str, str]:
    """A response's headers as a dict with lower-cased names."""
    return {k.lower(): v for k, v in headers.items()}
