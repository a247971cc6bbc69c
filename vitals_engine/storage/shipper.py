"""The shipper: an actor of a run that logs to a store, copying its journal there.

Invariants:

- The journal is written locally (`staging.py`) as for any run; the shipper only
  reads it. Every `interval` seconds it puts what the writer has synced since the last
  shipment as one new segment object (`segments.py`): whole lines, never rewritten.
  So a machine that is lost costs the samples finished in the last interval, not more.
- It holds the journal's lock in the store (`remote_lock.py`) from before the writer
  opens the journal until the final log is in place, and beats it every interval, apart
  from shipping (a slow segment does not hold a heartbeat up). The lock's lease
  (`VITALS_STORE_LEASE`, at least 6 intervals) is how long another machine waits for a
  heartbeat before it may take the lock over. A lock another run holds stops this run
  before anything is written.
- Fencing: once half the lease has passed since the heartbeat the store holds, the run
  takes no new sample (`admit()`, awaited before each one) and ships nothing: it buys
  nothing that another machine, taking the lock over, would buy too. Samples in flight
  finish. It says so once, and once more when a heartbeat goes through again and it
  goes on. A lock found taken over stops the run (`JournalInUseError`), and so does a
  store that has not answered for `VITALS_STORE_TIMEOUT` seconds (`StoreUnreachable`,
  naming the log kept on this disk).
- A store that fails to take segments is retried with backoff (the wait doubles, up to
  8 intervals), said once as a warning and once more when it recovers; the journal is
  whole on this disk meanwhile.
- The start of a run (the lock, where the segments end) and its end (`finish()`: the
  rest of the journal; `publish()`: the final log put once, as one object, then its
  listing entry, then the segments and the lock removed) give up once the store has
  not answered for `VITALS_STORE_TIMEOUT` seconds: from when the phase began (for the
  end, when the run stopped), and again from each answer. Calls left in flight count:
  each store call is bounded, a call the run left behind holds its mutex (of shipping,
  or of the lock) for the rest of its bound at most, and the end waits for it only
  within its own time. A store down at the end ends the run with a warning naming the
  local log, which holds every sample: nothing is lost.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import msgspec

from .._errors import JournalInUseError, StoreError, StoreUnreachable
from .._logging import log
from ..config import (
    ENV_STORE_LEASE,
    ENV_STORE_TIMEOUT,
    ship_interval_from_env,
    store_lease_from_env,
    store_timeout_from_env,
)
from .conditional import update
from .failures import retryable
from .location import Store, stamp
from .remote_lock import RemoteLock
from .segments import segment_name, segment_objects, segments

__all__ = ["LISTING", "Shipper"]

LISTING = "listing.json"
#: Tries of each step at the start and the end of a run before giving up (within
#: `VITALS_STORE_TIMEOUT` seconds in all).
FINAL_TRIES = 4
T = TypeVar("T")


class Shipper:
    """Ships one run's journal to `store`. See the module docstring.

    Example:
        >>> shipper = Shipper(store, writer.journal, written=lambda: writer.written)
        >>> async with anyio.create_task_group() as tg:
        ...     await tg.start(shipper.run)     # takes the lock
        ...     run.fence = shipper.admit        # no sample taken while the lock is in doubt
        ...     ...                              # the run; then writer.close()
        ...     shipper.stop()
        >>> await shipper.finish()               # the rest of the journal
        >>> shipper.publish(final_log_path)      # the log, then segments and lock removed
    """

    def __init__(
        self,
        store: Store,
        journal: Path,
        *,
        written: Callable[[], int] | None = None,
        shipped: int = 0,
        interval: float | None = None,
        log_path: Path | None = None,
    ) -> None:
        self.store = store
        self.journal = journal
        #: The run's final log on this disk: what a warning names when the store is away.
        self.log_path = log_path or journal.with_suffix(".json")
        self.interval = interval if interval is not None else ship_interval_from_env()
        #: Seconds the lock stays good without a heartbeat (others wait that long).
        self.lease = max(store_lease_from_env(), 6 * self.interval)
        #: Seconds spent on a store that does not answer before giving up on it.
        self.patience = store_timeout_from_env()
        self._beating = store.bounded(per_call=self._beating_cap)
        self.lock = RemoteLock(self._beating, journal.name, stale_after=self.lease)
        self.shipped = shipped
        self._written = written or (lambda: _size(journal))
        self._stopped = False
        self._wake = anyio.Event()
        self._delay = self.interval
        self._trouble: StoreError | None = None
        self._renewed = anyio.Event()
        self._fence_said = False
        #: Why the run stopped on the store's account (None: it did not).
        self.gave_up: StoreError | JournalInUseError | None = None
        self._ending: Store | None = None
        self._shipping_mutex = threading.Lock()  # one thread at a time ships
        self._lock_mutex = threading.Lock()  # ... and one touches the lock

    # -- the actor ---------------------------------------------------------------------

    async def run(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Take the lock (raising `JournalInUseError`, or a `StoreError` once the store
        has not answered for `VITALS_STORE_TIMEOUT` s), then ship and beat every interval
        until stopped; raise when the lock is lost or the store stays away.

        Example:
            >>> await task_group.start(shipper.run)
        """
        starting = self.store.bounded(seconds=self.patience)
        self.lock.store = starting.bounded(per_call=self._beating_cap)
        try:
            await self._with_retries(self.lock.acquire, starting, self._lock_mutex)
            await self._with_retries(
                lambda: self._resume_offset(starting), starting, self._shipping_mutex
            )
        except BaseException:
            self.lock.release()
            raise
        finally:
            self.lock.store = self._beating
        task_status.started()
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._heartbeat)
            await self._shipping()
            tg.cancel_scope.cancel()

    @property
    def _beating_cap(self) -> float:
        """Seconds a call about the lock may take: a quarter of the lease (at least 1 s)."""
        return min(max(self.lease / 4, 1.0), self.patience)

    def stop(self) -> None:
        """End the actor's loops; `finish()` ships the rest."""
        self._stopped = True
        self._wake.set()
        self._end()

    @property
    def fenced(self) -> bool:
        """Whether the lock is in doubt: half its lease has passed since the heartbeat the
        store holds (no sample is taken, nothing shipped, until one goes through)."""
        return self.lock.held and time.monotonic() - self.lock.renewed > self.lease / 2

    async def admit(self) -> None:
        """Awaited before each sample is taken: returns at once while the lock is safe,
        else waits for a heartbeat to go through (the actor stops the run when the lock
        is lost or the store stays away).

        Example:
            >>> RunJournal(fence=shipper.admit)
        """
        while self.fenced and self.gave_up is None:
            self._say_fenced()
            await self._renewed.wait()

    async def _with_retries(
        self, fn: Callable[[], object], within: Store, mutex: threading.Lock
    ) -> None:
        """`fn()` in a thread under `mutex`, a retryable failure tried again with backoff:
        at most `FINAL_TRIES` times, while `within` has time left."""
        delay = self.interval / 2
        for attempt in range(FINAL_TRIES):
            try:
                await self._in_thread(fn, mutex, within, abandon=False)
                return
            except StoreError as exc:
                left = within.left()
                if not retryable(exc) or attempt == FINAL_TRIES - 1 or not left or left <= 0:
                    raise
            await anyio.sleep(min(delay, left))
            delay *= 2

    async def _in_thread(
        self,
        fn: Callable[[], T],
        mutex: threading.Lock,
        within: Store | None = None,
        *,
        abandon: bool = True,
    ) -> T:
        """`fn()` in a worker thread, under `mutex`. With `abandon`, a call the run leaves
        behind when it ends goes on by itself (within its store's bound); a call of the
        start or the end waits for the mutex only while `within` has time left."""

        def locked() -> T:
            with self._holding(mutex, within):
                return fn()

        return await anyio.to_thread.run_sync(locked, abandon_on_cancel=abandon)

    @contextlib.contextmanager
    def _holding(self, mutex: threading.Lock, within: Store | None) -> Iterator[None]:
        """`mutex`, waited for while `within` has time left (a `StoreUnreachable` after)."""
        left = within.left() if within is not None else None
        if not mutex.acquire(timeout=-1 if left is None else max(0.0, left)):
            raise self._no_time(within)
        try:
            yield
        finally:
            mutex.release()

    def _no_time(self, within: Store | None) -> StoreUnreachable:
        seconds = (within.patience if within is not None else None) or self.patience
        return StoreUnreachable(
            f"{self.store.url}: no answer for {seconds:g} s ({ENV_STORE_TIMEOUT}).",
            url=self.store.url,
        )

    def _resume_offset(self, store: Store) -> None:
        """Ship from where the segments in the store end (0 for a new journal)."""
        parts = segments(store, self.journal.name)
        self.shipped = parts[-1].end if parts else 0

    # -- shipping ------------------------------------------------------------------------

    async def _shipping(self) -> None:
        while not self._stopped:
            with anyio.move_on_after(self._delay):
                await self._wake.wait()
            self._wake = anyio.Event()
            if not self._stopped and not self.fenced:
                await self._round()

    async def _round(self) -> None:
        upto = self._written()
        try:
            await self._in_thread(lambda: self.ship(upto), self._shipping_mutex)
        except StoreError as exc:
            self._failed(exc)
        else:
            self._recovered()

    def ship(self, upto: int, store: Store | None = None) -> int:
        """Put the journal's whole lines from `shipped` to `upto` as one segment; return
        the bytes shipped."""
        if upto <= self.shipped:
            return 0
        with self.journal.open("rb") as fh:
            fh.seek(self.shipped)
            data = fh.read(upto - self.shipped)
        cut = data.rfind(b"\n") + 1
        if cut == 0:
            return 0
        (store or self.store).put(segment_name(self.journal.name, self.shipped), data[:cut])
        self.shipped += cut
        return cut

    def _failed(self, exc: StoreError) -> None:
        if self._trouble is None:
            log.warning(
                f"cannot ship the journal to the store: {exc} Retrying with backoff; the "
                f"run goes on and its journal is whole at {self.journal}.",
                url=self.store.url,
            )
        self._trouble = exc
        self._delay = min(self._delay * 2, 8 * self.interval)

    def _recovered(self) -> None:
        if self._trouble is not None:
            log.warning("shipping the journal to the store again", url=self.store.url)
        self._trouble = None
        self._delay = self.interval

    # -- the heartbeat -------------------------------------------------------------------

    async def _heartbeat(self) -> None:
        """Beat the lock every interval (more often while it is in doubt); raise when it
        was taken over, or once the store has not answered for `VITALS_STORE_TIMEOUT` s."""
        wait = self.interval
        while True:
            await anyio.sleep(max(0.0, min(wait, self._give_up_at() - time.monotonic())))
            try:
                await self._in_thread(self.lock.beat, self._lock_mutex)
            except StoreError:
                wait = min(wait * 2, self.lease / 8)
            except JournalInUseError as exc:
                self.gave_up = exc
                raise
            else:
                wait = self.interval
                self._beaten()
            if time.monotonic() >= self._give_up_at():
                self.gave_up = self._gone()
                raise self.gave_up

    def _give_up_at(self) -> float:
        return self.lock.renewed + max(self.patience, self.lease / 2)

    def _beaten(self) -> None:
        if self._fence_said:
            log.warning(
                "the store answers again: the run is taking samples again", url=self.store.url
            )
            self._fence_said = False
        self._renewed.set()
        self._renewed = anyio.Event()

    def _say_fenced(self) -> None:
        if self._fence_said:
            return
        self._fence_said = True
        log.warning(
            f"the store has not taken this run's heartbeat for {self.lease / 2:g} s, half "
            f"the lease of its lock ({self.lease:g} s, {ENV_STORE_LEASE}): the run stopped "
            "taking samples, so that it buys nothing another machine taking the lock over "
            "would buy again (the samples in flight finish). It goes on when the store "
            f"answers, and stops once it has not answered for {self.patience:g} s "
            f"({ENV_STORE_TIMEOUT}).",
            url=self.store.url,
        )

    def _gone(self) -> StoreUnreachable:
        return StoreUnreachable(
            f"{self.store.url}: the store has not answered for {self.patience:g} s "
            f"({ENV_STORE_TIMEOUT}), so this run stopped; it had stopped taking samples "
            f"once half the lease of its lock ({self.lease:g} s, {ENV_STORE_LEASE}) had "
            "passed without a heartbeat. Every sample that finished is in its log on this "
            f"disk, {self.log_path}. Once the store answers, resume the run "
            "(eval(resume=True)): on this machine nothing is lost; on another, the samples "
            "this one did not ship run again.",
            url=self.store.url,
        )

    # -- the end ------------------------------------------------------------------------

    def _end(self) -> Store:
        """The store as the end of the run sees it: given up once it has not answered for
        `VITALS_STORE_TIMEOUT` s since the run stopped (or since its last answer)."""
        if self._ending is None:
            self._ending = self.store.bounded(seconds=self.patience)
        return self._ending

    def _ending_lock(self) -> None:
        self.lock.store = self._end().bounded(per_call=self._beating_cap)

    async def finish(self) -> bool:
        """Ship what is left of the journal (after the writer closed it); False when the
        store stays down (the journal stays whole here, and becomes the final log)."""
        if not self.lock.held or self.gave_up is not None:
            return False
        ending = self._end()
        self._ending_lock()
        try:
            await self._with_retries(self.lock.beat, ending, self._lock_mutex)  # still ours
            rest = _size(self.journal)
            await self._with_retries(lambda: self.ship(rest, ending), ending, self._shipping_mutex)
        except StoreError:
            return False  # `publish()` says where the log is
        except JournalInUseError as exc:
            self.gave_up = exc
            log.warning(f"{exc} This run's log is kept at {self.log_path}.", url=self.store.url)
            return False
        self._recovered()
        return True

    def publish(self, final: Path) -> bool:
        """Put the final log as one object, update the store's listing, then remove the
        journal's segments and the lock. False, with a warning naming the local log,
        when the store stays down (the segments stay: nothing is lost)."""
        if not self.lock.held or self.gave_up is not None:
            return False
        ending = self._end()
        self._ending_lock()
        try:
            with (
                self._holding(self._shipping_mutex, ending),
                self._holding(self._lock_mutex, ending),
            ):
                return self._publish(final, ending)
        except StoreError as exc:
            self._kept(final, exc)
            return False

    def _publish(self, final: Path, ending: Store) -> bool:
        try:
            _tries(self.lock.beat, self.interval, ending)
            _tries(lambda: ending.put_file(final, final.name), self.interval, ending)
            got = ending.info(final.name)
            if got is None or got.size != final.stat().st_size:
                raise StoreError(
                    f"{self.store.url_of(final.name)}: the log put there does not read back whole.",
                    url=self.store.url,
                )
            stamp(final, got.modified)  # the store's copy: not pulled again
        except (StoreError, JournalInUseError) as exc:
            self._kept(final, exc)
            return False
        self._update_listing(final, ending)
        self._remove_segments(ending)
        self.lock.release()
        return True

    def _kept(self, final: Path, exc: Exception) -> None:
        log.warning(
            f"the final log could not be put in the store: {exc} It is kept at "
            f"{final}; copy it to {self.store.url_of(final.name)}.",
            url=self.store.url,
        )

    def _update_listing(self, final: Path, store: Store) -> None:
        """The store's `listing.json` with the final log's entry (as the staging
        directory's listing has it), changed with the store's conditional writes so that
        runs finishing together each keep their entry. Best effort: a listing is rebuilt
        by readers."""
        try:
            local = msgspec.json.decode((final.parent / LISTING).read_bytes())
            entry = local[final.name]
        except (OSError, KeyError, TypeError, msgspec.DecodeError):
            return

        def with_entry(current: bytes | None) -> bytes:
            try:
                listing = msgspec.json.decode(current) if current is not None else {}
            except msgspec.DecodeError:
                listing = {}
            if not isinstance(listing, dict):
                listing = {}
            listing[final.name] = entry
            return msgspec.json.encode(listing)

        try:
            update(store, LISTING, with_entry)
        except (StoreError, OSError) as exc:
            log.warning(f"the store's {LISTING} was not updated: {exc}", url=self.store.url)

    def _remove_segments(self, store: Store) -> None:
        """Remove every object of the journal's folder in the store (a damaged segment,
        and those after it, too)."""
        try:
            names = [obj.name for obj in segment_objects(store, self.journal.name)]
            store.remove(names)
        except (StoreError, OSError) as exc:
            log.warning(
                f"the journal's segments were not removed: {exc} (its log is in place: "
                "they are only in the way of a listing)",
                url=self.store.url,
            )

    def release(self) -> None:
        """Let go of the lock (a run that ends without a final log)."""
        self._ending_lock()
        with contextlib.suppress(StoreError), self._holding(self._lock_mutex, self._end()):
            self.lock.release()


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _tries(fn: Callable[[], object], interval: float, within: Store) -> None:
    delay = interval / 2
    for attempt in range(FINAL_TRIES):
        try:
            fn()
            return
        except StoreError as exc:
            left = within.left()
            if not retryable(exc) or attempt == FINAL_TRIES - 1 or not left or left <= 0:
                raise
        time.sleep(min(delay, left))
        delay *= 2
