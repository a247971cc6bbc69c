"""The viewer's knowledge of one log directory, kept fresh by `refresh()`.

The catalog lists the directory's logs (`paths.log_files`), reads each
one's header once per change of its (inode, size, mtime), and loads a log's
samples only when they are asked for, keeping the few most recently used
in memory. Journals of running evals are followed with a `JournalTail`, so
each refresh reads only what was appended, and so is the sidecar holding the
streamed text of their in-flight samples (`log/live.py`): a stat per journal
per refresh, the file read only when a page asks for it (`live()`).

It is thread-safe: the live server calls it from worker threads, the bundle
from the caller's. `refresh()` returns the relative paths that changed and
tells its `listeners` those, and the journals whose live text changed, which
the server turns into events for the page.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._errors import LogFormatError
from ..log import schema as s
from ..log.decoding import NotALogError
from ..log.journal_format import JOURNAL_SUFFIX
from ..log.live import LiveSample, live_path, read_live
from ..log.logged_batches import BatchSummary, logged_batches
from .contents import Contents, JournalTail, counter, file_stamp, load_contents
from .paths import LogFile, sample_key
from .rows import batch_row, log_entry
from .sources import LocalSource, Source

__all__ = ["Catalog"]


class _Log:
    """What the catalog knows of one log file."""

    def __init__(self, file: LogFile) -> None:
        self.file = file
        self.header: s.EvalLog | None = None
        self.entry: dict[str, Any] | None = None
        self.error: str | None = None
        self.not_a_log = False
        #: A journal's tail, never changed once set here: a refresh updates a fork of it
        #: and puts that in its place (so readers may use it without the catalog's lock).
        self.tail: JournalTail | None = None
        self.contents: Contents | None = None
        self.load_lock = threading.Lock()
        #: The stamp of a journal's live-text sidecar when last looked at (None: none).
        self.live_stamp: tuple[int, int, int, int] | None = None


class _Reading:
    """One log's header being read by a refresh, without the catalog's lock.

    Made under the lock from what the catalog knew (`base`, its stamp then), filled
    in without it, and published under it only if `base` is still the log's state
    with that stamp (else another refresh published a read of its own meanwhile,
    or the log went: this one is dropped, and the next refresh sees what is new).
    """

    def __init__(self, file: LogFile, base: _Log | None) -> None:
        self.file = file
        self.base = base
        self.base_stamp = base.file.stamp if base is not None else None
        #: The same file as `base`'s (not replaced): its state and journal tail go on.
        self.same_file = base is not None and base.file.stamp[:2] == file.stamp[:2]
        #: A journal's tail once read: a fork of `base`'s (same file), else a new one.
        self.tail: JournalTail | None = None
        self.header: s.EvalLog | None = None
        self.entry: dict[str, Any] | None = None
        self.error: str | None = None
        self.not_a_log = False
        #: Set once the read was published (or dropped): other refreshes wait on it.
        self.done = threading.Event()


class Catalog:
    """The logs of `root`, their headers, and their samples on demand.

    No file is read with the catalog's lock held, so a slow log (a huge one, a slow
    disk) delays only the requests that need that log, never the listing of the
    others: `refresh()` notes under the lock what must be read, reads it without,
    and publishes the results under it again.

    Listings are applied in the order they were begun: a refresh whose listing began
    before one already applied lists again, for its older listing could undo the newer
    one (list a journal that has since given way to its final log, and drop that log).
    A journal that gave way to its final log (named in its start record) stands for
    that log: a page following a run may ask for the journal's documents as it ends.

    Example:
        >>> catalog = Catalog(Path("logs"))
        >>> catalog.refresh()            # the relative paths that changed
        >>> [e["task"] for e in catalog.entries()]
        >>> catalog.summaries(catalog.entries()[0]["file"])["rows"][:1]
    """

    def __init__(self, root: Path, *, keep_loaded: int = 4, source: Source | None = None) -> None:
        self.root = root.resolve()
        #: Where the logs are listed and read from: this directory, or an object store.
        self.source: Source = source if source is not None else LocalSource(self.root)
        self.keep_loaded = keep_loaded
        self.version = 0
        self._versions = counter()
        self._lock = threading.RLock()
        self._logs: dict[str, _Log] = {}
        self._loaded: OrderedDict[str, None] = OrderedDict()
        #: The header reads under way, by relative path (each refresh's own).
        self._reading: dict[str, _Reading] = {}
        self._scanned = False
        #: Refreshes number their listings as they begin them; the latest number applied.
        self._listings = 0
        self._applied = 0
        #: The final log of each journal seen (relative paths, from their start records).
        self._finals: dict[str, str] = {}
        #: Called with (changed relative paths, catalog version, journals whose live text
        #: changed) after any refresh that found changes, from whichever thread refreshed
        #: (the server turns them into events).
        self.listeners: list[Callable[[set[str], int, set[str]], None]] = []

    # -- scanning ----------------------------------------------------------------------

    def refresh(self) -> set[str]:
        """Re-list the directory and re-read what changed; the relative paths that changed.

        A log another refresh is already reading (in the same state of its file) is
        left to it: this one waits for that read before returning, so what was
        listed is read when it returns, and the other reports it to `listeners`.
        """
        mine: list[_Reading] = []
        theirs: list[_Reading] = []
        while True:
            with self._lock:
                self._listings += 1
                listing = self._listings
            files = {f.relative: f for f in self.source.files()}
            with self._lock:
                if listing < self._applied:
                    continue  # a listing begun later was applied meanwhile: list again
                self._applied = listing
                changed = self._plan(files, mine, theirs)
                break
        try:
            for reading in mine:
                self._read(reading)
            with self._lock:
                for reading in mine:
                    if self._publish(reading):
                        changed.add(reading.file.relative)
                if changed:
                    self.version = self._versions()
                self._scanned = True
                version = self.version
        finally:
            with self._lock:
                for reading in mine:
                    if self._reading.get(reading.file.relative) is reading:
                        del self._reading[reading.file.relative]
                    reading.done.set()
        for reading in theirs:
            reading.done.wait()
        live = self._live_changes()
        if changed or live:
            for listener in self.listeners:
                listener(changed, version, live)
        return changed

    def _plan(
        self, files: dict[str, LogFile], mine: list[_Reading], theirs: list[_Reading]
    ) -> set[str]:
        """Apply a listing (lock held): drop the logs gone (returned), note what to read in
        `mine` and the reads of other refreshes to wait for in `theirs`."""
        changed = {rel for rel in self._logs if rel not in files}
        for rel in changed:
            self._unload(rel)
            del self._logs[rel]
        for rel, file in files.items():
            state = self._logs.get(rel)
            if state is not None and state.file.stamp == file.stamp:
                continue
            pending = self._reading.get(rel)
            if pending is not None and pending.file.stamp == file.stamp:
                theirs.append(pending)
                continue
            reading = self._reading[rel] = _Reading(file, state)
            mine.append(reading)
        return changed

    def _publish(self, reading: _Reading) -> bool:
        """Put a finished read in place (lock held); False if it was overtaken meanwhile."""
        rel = reading.file.relative
        state = self._logs.get(rel)
        if state is not reading.base or (
            state is not None and state.file.stamp != reading.base_stamp
        ):
            return False
        if state is None or not reading.same_file:
            self._unload(rel)
            state = self._logs[rel] = _Log(reading.file)
        state.file = reading.file
        if reading.file.path.suffix != JOURNAL_SUFFIX:
            self._unload(rel)  # a `.json` / `.eval` log changed: its samples are read again
        elif reading.tail is not None:
            state.tail = reading.tail
            if reading.entry is not None and reading.entry.get("final"):
                self._finals[rel] = reading.entry["final"]
        if reading.header is not None:
            state.header = reading.header
        state.entry, state.error, state.not_a_log = reading.entry, reading.error, reading.not_a_log
        return True

    def _live_changes(self) -> set[str]:
        """The journals whose live-text sidecar appeared, changed or went away."""
        with self._lock:
            journals = [(rel, st) for rel, st in self._logs.items() if st.tail is not None]
        stamps = [(rel, st, file_stamp(live_path(st.file.path))) for rel, st in journals]
        live = set()
        with self._lock:
            for rel, state, stamp in stamps:
                if stamp != state.live_stamp and self._logs.get(rel) is state:
                    state.live_stamp = stamp
                    live.add(rel)
        return live

    def _read(self, reading: _Reading) -> None:
        """Read a log's header and entry after its file changed (without the lock)."""
        path, rel = reading.file.path, reading.file.relative
        try:
            if path.suffix == JOURNAL_SUFFIX:
                self._read_journal(reading)
            else:
                self._read_log(reading)
        except NotALogError:
            reading.not_a_log = True
        except LogFormatError as exc:
            reading.error = str(exc)
        except OSError as exc:
            reading.error = f"{rel}: cannot read the log: {exc}."

    def _read_journal(self, reading: _Reading) -> None:
        path, rel = reading.file.path, reading.file.relative
        base = reading.base.tail if reading.base is not None and reading.same_file else None
        tail = reading.tail = base.fork() if base is not None else JournalTail(path, self._versions)
        tail.update()
        header = tail.running_header()
        if header is None:
            raise LogFormatError(f"{rel}: the journal has no start record yet.")
        reading.header = header
        final = tail.final
        if final is not None and "/" in rel:
            final = f"{rel.rsplit('/', 1)[0]}/{final}"
        reading.entry = log_entry(
            rel,
            path,
            header,
            samples=len(tail.rows),
            version=tail.version(),
            final=final,
            batches=list(tail.batches.values()) or None,  # none yet: those its header names
        )

    def _read_log(self, reading: _Reading) -> None:
        header, samples = self.source.header(reading.file)
        reading.header = header
        reading.entry = log_entry(
            reading.file.relative,
            reading.file.path,
            header,
            samples=samples,
            version=self._versions(),
        )

    # -- samples ---------------------------------------------------------------------------

    def _unload(self, rel: str) -> None:
        state = self._logs.get(rel)
        if state is not None:
            state.contents = None
        self._loaded.pop(rel, None)

    def _load(self, state: _Log) -> Contents:
        """A `.json` / `.eval` log's contents, loaded once and kept among the recent few.

        Never called with the catalog's lock held (a load may take seconds).
        """
        with state.load_lock:
            contents = state.contents
            if contents is None:
                contents = load_contents(self.source.local(state.file), self._versions)
                with self._lock:
                    self._remember(state, contents)
        return contents

    def _remember(self, state: _Log, contents: Contents) -> None:
        """Keep `contents` on its log; forget the least recently loaded beyond `keep_loaded`."""
        state.contents = contents
        rel = state.file.relative
        self._loaded[rel] = None
        self._loaded.move_to_end(rel)
        while len(self._loaded) > self.keep_loaded:
            oldest, _ = self._loaded.popitem(last=False)
            if oldest in self._logs:
                self._logs[oldest].contents = None

    def _state(self, rel: str) -> _Log | None:
        """The fresh state of one log (its file re-checked), None if it is not a listed log.

        A journal that gave way to its final log stands for that log: a page that
        follows a run may ask for the journal's documents just as the run ends.
        """
        with self._lock:
            state = self._logs.get(rel)
        stale = state is None or self.source.stamp(state.file) != state.file.stamp
        if stale or not self._scanned:
            self.refresh()
            with self._lock:
                state = self._logs.get(rel) or self._final_of(rel)
        if state is None or state.not_a_log:
            return None
        if state.error is not None:
            raise LogFormatError(state.error)
        return state

    def final_of(self, rel: str) -> str | None:
        """The final log (relative path) that the journal `rel` gave way to, if it exists."""
        with self._lock:
            state = self._final_of(rel)
            return None if state is None else state.file.relative

    def _final_of(self, rel: str) -> _Log | None:
        """The listed final log of the journal `rel` (the journal itself is no longer listed):
        the one its start record named, else the one of the same stem."""
        stem = rel.removesuffix(JOURNAL_SUFFIX)
        if stem == rel:
            return None
        named = self._finals.get(rel)
        state = self._logs.get(named) if named is not None else None
        return state or self._logs.get(stem + ".json") or self._logs.get(stem + ".eval")

    def summaries(self, rel: str, since: int | None = None) -> dict[str, Any] | None:
        """The document `summaries.json`: the rows changed after `since` (all by default).

        `reset` says the rows replace any the client holds (the log was re-read).
        None when `rel` is not a log of the directory; `LogFormatError` for a
        log that cannot be read.
        """
        state = self._state(rel)
        if state is None:
            return None
        contents = state.tail if state.tail is not None else self._load(state)
        with self._lock:
            reset = since is None or since < contents.created
            rows = list(contents.rows_since(None if reset else since))
            status = state.header.status if state.header is not None else "started"
            return {
                "file": rel,
                "version": contents.version(),
                "reset": reset,
                "complete": status != "started",
                "rows": rows,
            }

    def sample(self, rel: str, id: int | str, epoch: int) -> bytes | None:
        """One sample's JSON, as the log holds it; None if there is no such log or sample."""
        for _ in range(2):  # once more if the file went (a journal giving way to its final log)
            state = self._state(rel)
            if state is None:
                return None
            contents = state.tail if state.tail is not None else self._load(state)
            try:  # without the lock: contents never change (a journal's tail is replaced)
                return contents.sample_json(id, epoch)
            except FileNotFoundError:
                continue
        return None

    def live(self, rel: str) -> dict[str, Any] | None:
        """The document `live.json`: the streamed text of a running log's in-flight samples.

        `samples` is empty for a log that is not running or has no sidecar (so for
        a journal that gave way to its final log). None when `rel` is not a log of
        the directory; `LogFormatError` for a log that cannot be read.
        """
        state = self._state(rel)
        if state is None:
            return None
        running = state.header is not None and state.header.status == "started"
        document = None
        if state.tail is not None and running:
            document = read_live(live_path(state.file.path))
        samples = [_live_sample(sample) for sample in (document.samples if document else [])]
        return {
            "file": rel,
            "running": running,
            "updated": document.updated if document is not None else None,
            "samples": samples,
        }

    def batches(self, rel: str) -> dict[str, Any] | None:
        """The document `batches.json`: the provider batches of a log's run, without their
        requests: a journal's as recorded so far (re-read as it grows), a final log's
        from its header.

        None when `rel` is not a log of the directory; `LogFormatError` for a log that
        cannot be read.
        """
        state = self._state(rel)
        if state is None:
            return None
        tail = state.tail
        known: list[BatchSummary] = list(tail.batches.values()) if tail is not None else []
        if not known and state.header is not None:
            known = list(logged_batches(state.header))
        rows = [batch_row(batch) for batch in known]
        return {
            "file": rel,
            "running": state.header is not None and state.header.status == "started",
            "pending": sum(row["pending"] for row in rows),
            "ended": sum(row["ended"] is not None for row in rows),
            "batches": rows,
        }

    # -- listing -------------------------------------------------------------------------

    def entries(self) -> list[dict[str, Any]]:
        """The `logs.json` entry of every readable log, by relative path."""
        if not self._scanned:
            self.refresh()
        with self._lock:
            return [st.entry for st in self._logs.values() if st.entry is not None]

    def errors(self) -> list[dict[str, str]]:
        """The logs that could not be read: relative path and why."""
        with self._lock:
            return [
                {"file": rel, "message": st.error}
                for rel, st in self._logs.items()
                if st.error is not None
            ]

    def path(self, rel: str) -> Path | None:
        """The file of a listed log (None for anything else)."""
        if not self._scanned:
            self.refresh()
        with self._lock:
            state = self._logs.get(rel)
            if state is None or state.not_a_log:
                return None
        return self.source.local(state.file)

    def headers(self) -> dict[str, s.EvalLog]:
        """The header of every readable log, by relative path."""
        with self._lock:
            return {
                rel: st.header
                for rel, st in self._logs.items()
                if st.header is not None and st.entry is not None
            }


def _live_sample(sample: LiveSample) -> dict[str, Any]:
    """One in-flight sample of `live.json`: its text so far, and its transcript's last
    events when it has one (an agent's)."""
    entry: dict[str, Any] = {
        "key": sample_key(sample.id),
        "id": sample.id,
        "epoch": sample.epoch,
        "role": sample.role,
        "input": sample.input,
        "text": sample.text,
        "chars": sample.chars,
        "updated": sample.updated,
    }
    if sample.events:
        entry["events"] = sample.events
    return entry
