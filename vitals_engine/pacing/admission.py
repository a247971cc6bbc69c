"""Admission: new samples wait while the endpoint their solver calls is already busy.

A run keeps up to `max_concurrency` samples at work. When the endpoint its solver
calls allows fewer requests at once (a model's own `Limits`, or several runs
sharing it), the samples beyond that only queue for a request slot, each holding
its record, its chat and a stack of coroutines. Six runs of C=1,000 on one endpoint
of 1,000 would keep 6,000 samples open to make 1,000 requests, and the memory they
hold costs CPU on every sample (the garbage collector walks it, the caches miss).

So before a run starts a sample it asks the endpoints its solver calls, and the
sample holds its place until it leaves the solver stage. An endpoint admits a
sample while its samples at work, from every run, are fewer than its concurrency
plus a backlog, which keeps it busy while samples are between their calls.
Samples wait in one queue per endpoint, in order, whichever run they belong to.
Admission never stops a sample already at work: it only delays starting new ones.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import anyio

__all__ = ["Admission", "backlog"]

#: Samples an endpoint keeps at work beyond its concurrency: at least this many, or one
#: in `BACKLOG_SHARE` of its concurrency.
MIN_BACKLOG = 16
BACKLOG_SHARE = 8


def backlog(concurrency: int) -> int:
    """How many samples beyond `concurrency` an endpoint keeps at work."""
    return max(MIN_BACKLOG, concurrency // BACKLOG_SHARE)


class Admission:
    """One endpoint's admission of new samples, shared by the runs that call it.

    `capacity()` is the endpoint's concurrency now (it changes as the endpoint adapts).

    Example:
        >>> admission = Admission(lambda: 10)
        >>> await admission.enter()       # before a sample that calls the endpoint starts
        >>> admission.leave()             # when it leaves the solver stage
    """

    __slots__ = ("_capacity", "_queue", "at_work")

    def __init__(self, capacity: Callable[[], int]) -> None:
        self._capacity = capacity
        #: Samples admitted and not gone, from any run (those woken from the queue and
        #: not resumed yet included: their place is kept).
        self.at_work = 0
        self._queue: deque[anyio.Event] = deque()

    @property
    def waiting(self) -> int:
        """Samples waiting to be admitted."""
        return len(self._queue)

    def has_room(self) -> bool:
        size = self._capacity()
        return self.at_work < size + backlog(size)

    async def enter(self) -> None:
        """Return when the endpoint admits one more sample (at once, when it has room
        and nobody waits before)."""
        if not self._queue and self.has_room():
            self.at_work += 1
            return
        turn = anyio.Event()
        self._queue.append(turn)
        self._admit()  # room made by a capacity raised meanwhile
        try:
            await turn.wait()
        except BaseException:
            if turn.is_set():
                self.leave()  # admitted, but it will not start
            else:
                self._queue.remove(turn)
            raise

    def leave(self) -> None:
        """A sample admitted is done with the endpoint: the next one waiting goes."""
        self.at_work -= 1
        if self._queue:
            self._admit()

    def _admit(self) -> None:
        queue = self._queue
        while queue and self.has_room():
            self.at_work += 1
            queue.popleft().set()
