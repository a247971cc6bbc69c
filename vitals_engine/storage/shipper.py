"""The shipper: an actor of a run that logs to a store, copying its journal there.

Invariants:

- The journal is written locally (`staging.py`) as for any run; the shipper only
  reads it. Every `interval` seconds it puts what the writer has synced since the last
  shipment as one new segment object (`segments.py`): whole lines, never rewritten.
  So a machine that is lost costs the samples finished in the last interval, not more.
- It holds the journal's lock in the store (`remote_lock.py`) from before the writer
  opens the journal until the final log is in place, and beats it every interval. A
  lock another run holds stops this run before anything is written; a lock lost
  mid-run (taken over while the store was unreachable) stops it at the next beat.
- A store that fails is retried with backoff (the wait doubles, up to 8 intervals),
  said once as a warning and once more when it recovers; the run goes on, its journal
  whole on this disk. At the end the rest is shipped with a few tries, then the final
  log is put once, as one object, and only then are the segments and the lock
  removed (`publish()`). If the store is still down, the run ends with a warning
  naming the local journal or log: nothing is lost.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import msgspec

from .._errors import StoreError
from .._logging import log
from ..config import ship_interval_from_env
from .conditional import update
from .failures import retryable
from .location import Store, stamp
from .remote_lock import RemoteLock
from .segments import segment_name, segment_objects, segments

__all__ = ["LISTING", "Shipper"]

LISTING = "listing.json"
#: Tries at the end of a run (the rest of the journal, the final log) before giving up.
FINAL_TRIES = 4


class Shipper:
    """Ships one run's journal to `store`. See the module docstring.

    Example:
        >>> shipper = Shipper(store, writer.journal, written=lambda: writer.written)
        >>> async with anyio.create_task_group() as tg:
        ...     await tg.start(shipper.run)     # takes the lock
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
    ) -> None:
        self.store = store
        self.journal = journal
        self.interval = interval if interval is not None else ship_interval_from_env()
        self.lock = RemoteLock(store, journal.name, stale_after=max(30.0, 6 * self.interval))
        self.shipped = shipped
        self._written = written or (lambda: _size(journal))
        self._stopped = False
        self._wake = anyio.Event()
        self._delay = self.interval
        self._trouble: StoreError | None = None

    # -- the actor ---------------------------------------------------------------------

    async def run(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Take the lock (raising `JournalInUseError` or a `StoreError` at once), then
        ship every interval until stopped."""
        await self._with_retries(self.lock.acquire)
        try:
            await self._with_retries(self._resume_offset)
        except BaseException:
            self.lock.release()
            raise
        task_status.started()
        while not self._stopped:
            with anyio.move_on_after(self._delay):
                await self._wake.wait()
            self._wake = anyio.Event()
            if not self._stopped:
                await self._round()

    def stop(self) -> None:
        """End the actor's loop; `finish()` ships the rest."""
        self._stopped = True
        self._wake.set()

    async def _with_retries(self, fn: Callable[[], object]) -> None:
        delay = self.interval / 2
        for attempt in range(FINAL_TRIES):
            try:
                await anyio.to_thread.run_sync(fn)
                return
            except StoreError as exc:
                if not retryable(exc) or attempt == FINAL_TRIES - 1:
                    raise
            await anyio.sleep(delay)
            delay *= 2

    def _resume_offset(self) -> None:
        """Ship from where the segments in the store end (0 for a new journal)."""
        parts = segments(self.store, self.journal.name)
        self.shipped = parts[-1].end if parts else 0

    async def _round(self) -> None:
        upto = self._written()
        try:
            await anyio.to_thread.run_sync(self._ship_and_beat, upto)
        except StoreError as exc:
            self._failed(exc)
        else:
            self._recovered()

    def _ship_and_beat(self, upto: int) -> None:
        self.ship(upto)
        self.lock.beat()

    def ship(self, upto: int) -> int:
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
        self.store.put(segment_name(self.journal.name, self.shipped), data[:cut])
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

    # -- the end ------------------------------------------------------------------------

    async def finish(self) -> bool:
        """Ship what is left of the journal (after the writer closed it); False when the
        store stays down (the journal stays whole here, and becomes the final log)."""
        if not self.lock.held:
            return False
        try:
            await self._with_retries(lambda: self.ship(_size(self.journal)))
        except StoreError:
            return False  # `publish()` says where the log is
        self._recovered()
        return True

    def publish(self, final: Path) -> bool:
        """Put the final log as one object, update the store's listing, then remove the
        journal's segments and the lock. False, with a warning naming the local log,
        when the store stays down (the segments stay: nothing is lost)."""
        if not self.lock.held:
            return False
        try:
            _tries(lambda: self.store.put_file(final, final.name), self.interval)
            got = self.store.info(final.name)
            if got is None or got.size != final.stat().st_size:
                raise StoreError(
                    f"{self.store.url_of(final.name)}: the log put there does not read back whole.",
                    url=self.store.url,
                )
            stamp(final, got.modified)  # the store's copy: not pulled again
        except StoreError as exc:
            log.warning(
                f"the final log could not be put in the store: {exc} It is kept at "
                f"{final}; copy it to {self.store.url_of(final.name)}.",
                url=self.store.url,
            )
            return False
        self._update_listing(final)
        self._remove_segments()
        self.lock.release()
        return True

    def _update_listing(self, final: Path) -> None:
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
            update(self.store, LISTING, with_entry)
        except (StoreError, OSError) as exc:
            log.warning(f"the store's {LISTING} was not updated: {exc}", url=self.store.url)

    def _remove_segments(self) -> None:
        """Remove every object of the journal's folder in the store (a damaged segment,
        and those after it, too)."""
        try:
            names = [obj.name for obj in segment_objects(self.store, self.journal.name)]
            self.store.remove(names)
        except (StoreError, OSError) as exc:
            log.warning(
                f"the journal's segments were not removed: {exc} (its log is in place: "
                "they are only in the way of a listing)",
                url=self.store.url,
            )

    def release(self) -> None:
        """Let go of the lock (a run that ends without a final log)."""
        self.lock.release()


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _tries(fn: Callable[[], object], interval: float) -> None:
    delay = interval / 2
    for attempt in range(FINAL_TRIES):
        try:
            fn()
            return
        except StoreError as exc:
            if not retryable(exc) or attempt == FINAL_TRIES - 1:
                raise
        time.sleep(delay)
        delay *= 2
