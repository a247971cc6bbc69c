"""A clock for tests: time moves only when every task waits on it.

The limiter and the retry loop take a `Clock` (`pacing/clock.py`); given a
`VirtualClock`, tests of rate limits and backoff run instantly and deterministically,
on asyncio and trio.
"""

from __future__ import annotations

import heapq
import itertools

import anyio
import anyio.lowlevel

__all__ = ["VirtualClock"]


class VirtualClock:
    """A clock whose time moves only when every task waits on it.

    Run `drive()` in the same task group as the code under test; it waits
    until all tasks are blocked, then jumps to the earliest pending wake-up.

    Example:
        >>> clock = VirtualClock()
        >>> async with anyio.create_task_group() as tg:
        ...     tg.start_soon(clock.drive)
        ...     await clock.sleep(30)   # returns at once, clock.now() == 30
        ...     tg.cancel_scope.cancel()
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._sleepers: list[tuple[float, int, anyio.Event]] = []
        self._order = itertools.count()

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await anyio.lowlevel.checkpoint()
            return
        wake = anyio.Event()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._order), wake))
        await wake.wait()

    def advance(self, seconds: float) -> None:
        """Move time forward by hand, waking whoever is due."""
        self._now += seconds
        while self._sleepers and self._sleepers[0][0] <= self._now:
            heapq.heappop(self._sleepers)[2].set()

    async def drive(self) -> None:
        """Forever: when every task is blocked, jump to the next wake-up."""
        while True:
            await anyio.wait_all_tasks_blocked()
            if not self._sleepers:
                await anyio.lowlevel.checkpoint()
                continue
            due, _, wake = heapq.heappop(self._sleepers)
            self._now = max(self._now, due)
            wake.set()
