"""Connection pools that belong to a run: one transport per base URL, closed at its end.

Which transport: our own `Http11Transport` (HTTP/1.1 over anyio streams, on
asyncio and trio alike: 0.12-0.2 ms CPU per request measured, against
0.26-0.67 ms for aiohttp and 1.7-5.6 ms for sharded httpx); the user's own
`httpx.AsyncClient` when one is given, used as it is (its auth, TLS and proxy
settings its own);
`VITALS_TRANSPORT=aiohttp` or `=httpx` to choose another.

A run opens a `transport_scope()`; every provider call inside it (every
sample, solver and judge alike) shares the scope's transports. The runs of an
eval set share one scope, the set's. A chat used outside any run gets a scope
of its own for that one call.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from typing import Any

import anyio

from .._sync import on_asyncio
from ..config import transport_from_env
from .base import Transport

__all__ = ["TransportPool", "current_pool", "transport_scope", "using_pool"]


class TransportPool:
    """The transports of one run, made on first use inside the running event loop."""

    def __init__(
        self, pool_size: int = 100, prefer: str | None = None, *, shared: bool = False
    ) -> None:
        self.pool_size = pool_size
        self.prefer = prefer or transport_from_env() or "auto"
        #: Whether runs started inside its scope use it rather than their own (an eval set's).
        self.shared = shared
        self._transports: dict[tuple[str, int], Transport] = {}

    def get(self, base_url: str, client: Any = None) -> Transport:
        """The transport for `base_url` (or for the user's own httpx client)."""
        key = (base_url, id(client) if client is not None else 0)
        transport = self._transports.get(key)
        if transport is None:
            # Each transport is imported when first chosen: aiohttp alone costs more to
            # import than the rest of the package, and a run on the mock model needs none.
            if client is not None:
                from .httpx_client import HttpxTransport

                transport = HttpxTransport(client=client)
            elif self.prefer == "aiohttp" and on_asyncio():
                from .aiohttp_client import AiohttpTransport

                transport = AiohttpTransport(self.pool_size)
            elif self.prefer == "httpx":
                from .httpx_client import HttpxTransport

                transport = HttpxTransport(self.pool_size)
            else:
                from .http11 import Http11Transport

                transport = Http11Transport(self.pool_size)
            self._transports[key] = transport
        return transport

    async def aclose(self) -> None:
        transports, self._transports = list(self._transports.values()), {}
        for transport in transports:
            await transport.aclose()


_pool: ContextVar[TransportPool | None] = ContextVar("vitals_transport_pool", default=None)


def current_pool() -> TransportPool | None:
    """The transport pool of the running run, if any."""
    return _pool.get()


@asynccontextmanager
async def transport_scope(
    pool_size: int = 100, prefer: str | None = None, *, shared: bool = False, join: bool = False
) -> AsyncIterator[TransportPool]:
    """Share one pool of connections among every call made inside; close it at the end.

    `shared=True` makes a pool that the runs started inside use (each opening its scope
    with `join=True`) instead of their own: the runs of an eval set reuse each other's
    connections to an endpoint they share, rather than each keeping as many of its own.

    Example:
        >>> async with transport_scope(pool_size=600, shared=True):
        ...     async with transport_scope(pool_size=100, join=True) as pool:  # the same
        ...         ...
    """
    outer = _pool.get()
    if join and outer is not None and outer.shared:
        yield outer  # its owner closes it
        return
    pool = TransportPool(pool_size, prefer, shared=shared)
    token = _pool.set(pool)
    try:
        yield pool
    finally:
        _pool.reset(token)
        with anyio.CancelScope(shield=True):
            await pool.aclose()


@contextmanager
def using_pool(pool: TransportPool) -> Iterator[TransportPool]:
    """Make calls inside use `pool`, which outlives the block (its owner closes it).

    Example:
        >>> pool = TransportPool(50)            # kept by a long-lived worker
        >>> with using_pool(pool):
        ...     await run.execute(batch, sink)
        >>> await pool.aclose()
    """
    token = _pool.set(pool)
    try:
        yield pool
    finally:
        _pool.reset(token)
