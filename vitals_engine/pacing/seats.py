"""Seats: how many samples a stage works on at once, not counting those waiting out a retry.

A run keeps `max_concurrency` samples at work per stage. A sample whose
model call was answered 429 (or failed) waits before trying again, often a
second or more; holding its place meanwhile would leave the model idle
while it has capacity. So a waiting sample lends its seat: a parked or
spare worker starts another sample. When its wait is over the sample goes
on at once, even if every seat is taken; the next worker to finish a
sample then parks until a seat is lent again. Spare workers are started
only when a seat is lent and none is parked, at most as many as seats: at
most twice `max_concurrency` samples are open at once, and with no retries
there are no spares and every worker keeps its seat from one sample to the
next (no hand-over, no task switch per sample).

A sample lends its seat only while its one model call in progress waits: a
solver running calls side by side keeps its seat.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import TypeVar

import anyio

__all__ = ["Seat", "Seats", "current_seat"]

T = TypeVar("T")


class Seats:
    """A stage's seats: how many samples are at work, and the workers parked for lack of one.

    Example:
        >>> seats = Seats(100)
        >>> await seats.take()          # a worker, before it takes a sample
        >>> seats.release()             # after it
    """

    def __init__(
        self,
        count: int,
        *,
        spawn: Callable[[], object] | None = None,
        on_close: Callable[[], object] | None = None,
        spares: int | None = None,
    ) -> None:
        self.limit = count
        self.active = 0
        self._parked: deque[anyio.Event] = deque()
        self._closed = False
        self._spawn = spawn
        self._spares = (count if spares is None else spares) if spawn is not None else 0
        self._on_close = on_close

    async def take(self) -> None:
        """A seat for the worker's next sample; parks while every seat is taken."""
        while self.full:
            event = anyio.Event()
            self._parked.append(event)
            try:
                await event.wait()
            except BaseException:
                if not event.is_set():
                    self._parked.remove(event)
                else:
                    self._wake()  # woken for a seat this worker will not use
                raise
        self.active += 1

    @property
    def full(self) -> bool:
        """Whether a worker taking a seat now would park."""
        return self.active >= self.limit and not self._closed

    def release(self) -> None:
        """The worker's sample is done."""
        self.active -= 1

    def lend(self) -> None:
        """A sample starts waiting out a retry: a parked worker, or a spare one started
        now, may start another."""
        self.active -= 1
        if self._parked:
            self._wake()
        elif self._spares > 0 and not self._closed and self._spawn is not None:
            self._spares -= 1
            self._spawn()

    def come_back(self) -> None:
        """A sample's wait is over: it goes on at once (the next worker to finish parks)."""
        self.active += 1

    @property
    def closed(self) -> bool:
        """Whether the stage has run out of samples."""
        return self._closed

    def close(self) -> None:
        """No more samples: wake every parked worker so it can see that and stop."""
        if self._closed:
            return
        self._closed = True
        while self._parked:
            self._parked.popleft().set()
        if self._on_close is not None:
            self._on_close()

    def _wake(self) -> None:
        if self._parked and self.active < self.limit:
            self._parked.popleft().set()


class Seat:
    """One worker's hold on a seat, and the model calls its current sample has in progress."""

    __slots__ = ("calls", "held", "seats")

    def __init__(self, seats: Seats) -> None:
        self.seats = seats
        self.held = False
        self.calls = 0

    async def take(self) -> None:
        await self.seats.take()
        self.held = True

    def leave(self) -> None:
        if self.held:
            self.held = False
            self.seats.release()

    async def wait_out(self, seconds: float, sleep: Callable[[float], Awaitable[None]]) -> None:
        """Wait `seconds` before a retry, lending the seat to another sample if this
        sample's only call in progress is the one waiting."""
        await self.lent_while(lambda: sleep(seconds))

    async def lent_while(self, wait: Callable[[], Awaitable[T]]) -> T:
        """Await `wait()` (a retry's wait, a batch's answer), lending the seat to another
        sample meanwhile if this sample's only call in progress is the one waiting."""
        if self.calls != 1 or not self.held:
            return await wait()
        self.held = False
        self.seats.lend()
        value = await wait()
        self.seats.come_back()
        self.held = True
        return value


_current: ContextVar[Seat | None] = ContextVar("vitals_seat", default=None)


def current_seat() -> Seat | None:
    """The seat of the worker running this code, if any."""
    return _current.get()


def sit(seat: Seat) -> None:
    """Make `seat` the current task's (each worker runs in a task, with its own context)."""
    _current.set(seat)
