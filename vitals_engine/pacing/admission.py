"""Admission: new samples wait while the endpoint their solver calls is already busy.

A run keeps up to `max_concurrency` samples at work. When the endpoint its solver
calls allows fewer requests at once (a model's own `RateLimits`, or several runs
sharing it), the samples beyond that only queue for a request slot, each holding
its record, its chat and a stack of coroutines. Six runs of C=1,000 on one endpoint
of 1,000 would keep 6,000 samples open to make 1,000 requests, and the memory they
hold costs CPU on every sample (the garbage collector walks it, the caches miss).

So before a run starts a sample it asks the endpoints its solver calls, and the
sample holds its place until it leaves the solver stage. An endpoint admits a
sample while its samples at work, from every run, are fewer than its concurrency
plus a backlog, which keeps it busy while samples are between their calls.

The runs sharing an endpoint share its places evenly: when a place comes free it
goes to the waiting run with the fewest samples at work (the first to wait among
equals). A worker whose sample leaves and who takes the next sample of the same run
keeps that sample's place (`Places.keep`) unless a run waiting has fewer at work
than its own would have without it, or the endpoint's concurrency went down: runs
that hold their even share so hand no place around, and nobody waits to be woken.
Admission never stops a sample already at work: it only delays starting new ones.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Sequence

import anyio

__all__ = ["Admission", "Places", "backlog"]

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
    A run is any hashable that names it (the run's own object).

    Example:
        >>> admission = Admission(lambda: 10)
        >>> await admission.enter(run)    # before a sample of `run` starts
        >>> admission.keep(run)           # it left; may the next of `run` have its place?
        True
        >>> admission.leave(run)          # it left, and no other sample takes its place
    """

    __slots__ = ("_by_run", "_capacity", "_queued", "_waiting", "at_work")

    def __init__(self, capacity: Callable[[], int]) -> None:
        self._capacity = capacity
        #: Samples admitted and not gone, from any run (those woken from the queue and
        #: not resumed yet included: their place is kept).
        self.at_work = 0
        self._by_run: dict[Hashable, int] = {}
        #: The runs waiting, in the order they began to wait, each with its samples' turns.
        self._waiting: dict[Hashable, deque[anyio.Event]] = {}
        self._queued = 0

    @property
    def waiting(self) -> int:
        """Samples waiting to be admitted."""
        return self._queued

    def at_work_of(self, run: Hashable) -> int:
        """Samples of `run` admitted and not gone."""
        return self._by_run.get(run, 0)

    def places(self) -> int:
        """How many samples the endpoint keeps at work now: its concurrency and backlog."""
        size = self._capacity()
        return size + backlog(size)

    def has_room(self) -> bool:
        return self.at_work < self.places()

    async def enter(self, run: Hashable) -> None:
        """Return when the endpoint admits one more sample of `run` (at once, when it has
        room and nobody waits)."""
        if not self._queued and self.has_room():
            self._admit_one(run)
            return
        turn = anyio.Event()
        self._waiting.setdefault(run, deque()).append(turn)
        self._queued += 1
        self._admit()  # room made by a capacity raised meanwhile
        try:
            await turn.wait()
        except BaseException:
            if turn.is_set():
                self.leave(run)  # admitted, but it will not start
            else:
                self._forget(run, turn)
            raise

    def keep(self, run: Hashable) -> bool:
        """A sample of `run` left and the next of `run` is ready: whether it may have the
        place the one that left holds (else that place must be left, and the next wait).
        It may unless the endpoint is over its size now, or a run waits that has fewer
        samples at work than `run` would have without that place."""
        if self.at_work > self.places():
            return False
        if self._queued:
            mine = self._by_run[run] - 1
            by_run = self._by_run
            for other in self._waiting:
                if by_run.get(other, 0) < mine:
                    return False
        return True

    def leave(self, run: Hashable) -> None:
        """A sample of `run` admitted is done with the endpoint: a waiting one goes."""
        self.at_work -= 1
        left = self._by_run[run] - 1
        if left:
            self._by_run[run] = left
        else:
            del self._by_run[run]
        if self._queued:
            self._admit()

    def _admit_one(self, run: Hashable) -> None:
        self.at_work += 1
        self._by_run[run] = self._by_run.get(run, 0) + 1

    def _admit(self) -> None:
        """Let waiting samples in while there is room, each from the run with the fewest
        at work."""
        waiting, by_run = self._waiting, self._by_run
        while self._queued and self.has_room():
            run = min(waiting, key=lambda r: by_run.get(r, 0))
            turns = waiting[run]
            turn = turns.popleft()
            if not turns:
                del waiting[run]
            self._queued -= 1
            self._admit_one(run)
            turn.set()

    def _forget(self, run: Hashable, turn: anyio.Event) -> None:
        turns = self._waiting[run]
        turns.remove(turn)
        if not turns:
            del self._waiting[run]
        self._queued -= 1


class Places:
    """The places one sample of `run` holds at the endpoints its solver calls.

    Example:
        >>> places = await Places.enter(run, admissions)
        >>> ...                                   # the sample is solved
        >>> if not places.keep(admissions):       # the next sample of the run is ready
        ...     places.release()
        ...     places = await Places.enter(run, admissions)
    """

    __slots__ = ("admissions", "run")

    def __init__(self, run: Hashable, admissions: Sequence[Admission]) -> None:
        self.run = run
        self.admissions = admissions

    @classmethod
    async def enter(cls, run: Hashable, admissions: Sequence[Admission]) -> Places:
        """Wait for a place at every admission, in their order (so that samples waiting
        on two endpoints never hold each other up)."""
        entered: list[Admission] = []
        try:
            for admission in admissions:
                await admission.enter(run)
                entered.append(admission)
        except BaseException:
            Places(run, entered).release()
            raise
        return cls(run, entered)

    def keep(self, admissions: Sequence[Admission]) -> bool:
        """Whether the next sample of the run may have these places as they are: it calls
        the same endpoints, and each lets it keep its place (`Admission.keep`)."""
        held, run = self.admissions, self.run
        if len(admissions) != len(held):
            return False
        for mine, wanted in zip(held, admissions, strict=True):
            if mine is not wanted or not mine.keep(run):
                return False
        return True

    def release(self) -> None:
        """Leave every place (the sample is gone, and no other takes its places)."""
        for admission in self.admissions:
            admission.leave(self.run)
