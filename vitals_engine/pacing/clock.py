"""Time as the limiter and the retry loop see it, so tests can replace it.

`SystemClock` is the real thing; a test's clock (`vitals_engine.testing.VirtualClock`)
runs time forward only when every task is blocked.
"""

from __future__ import annotations

import time
from typing import Protocol

import anyio

__all__ = ["Clock", "SystemClock"]


class Clock(Protocol):
    """Monotonic seconds, and a way to wait for them to pass."""

    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real monotonic clock."""

    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(max(0.0, seconds))
