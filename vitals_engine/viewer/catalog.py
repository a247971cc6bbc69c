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
from ..log.live import live_path, read_live
from ..log.reader import read_log
from .contents import Contents, JournalTail, count_samples, counter, file_stamp, load_contents
from .paths import LogFile, log_files, sample_key
from .rows import log_entry

__all__ = ["Catalog"]


class _Log:
    """What the catalog knows of one log file."""

    def __init__(self, file: LogFile) -> None:
        self.file = file
        self.header: s.EvalLog | None = None
        self.entry: dict[str, Any] | None = None
        self.error: str | None = None
        self.not_a_log = False
        self.tail: JournalTail | None = None
        self.contents: Contents | None = None
        self.load_lock = threading.Lock()
        #: The stamp of a journal's live-text sidecar when last looked at (None: none).
        self.live_stamp: tuple[int, int, int, int] | None = None


class Catalog:
    """The logs of `root`, their headers, and their samples on demand.

    Example:
        >>> catalog = Catalog(Path("logs"))
        >>> catalog.refresh()            # the relative paths that changed
        >>> [e["task"] for e in catalog.entries()]
        >>> catalog.summaries(catalog.entries()[0]["file"])["rows"][:1]
    """

    def __init__(self, root: Path, *, keep_loaded: int = 4) -> None:
        self.root = root.resolve()
        self.keep_loaded = keep_loaded
        self.version = 0
        self._versions = counter()
        self._lock = threading.RLock()
        self._logs: dict[str, _Log] = {}
        self._loaded: OrderedDict[str, None] = OrderedDict()
        self._scanned = False
        #: Called with (changed relative paths, catalog version, journals whose live text
        #: changed) after any refresh that found changes, from whichever thread refreshed
        #: (the server turns them into events).
        self.listeners: list[Callable[[set[str], int, set[str]], None]] = []

    # -- scanning ----------------------------------------------------------------------

    def refresh(self) -> set[str]:
        """Re-list the directory and re-read what changed; the relative paths that changed."""
        files = {f.relative: f for f in log_files(self.root)}
        with self._lock:
            changed = {rel for rel in self._logs if rel not in files}
            for rel in changed:
                self._unload(rel)
                del self._logs[rel]
            for rel, file in files.items():
                state = self._logs.get(rel)
                if state is not None and state.file.stamp == file.stamp:
                    continue
                if state is None or state.file.stamp[:2] != file.stamp[:2]:
                    self._unload(rel)
                    state = self._logs[rel] = _Log(file)
                state.file = file
                self._read(state)
                changed.add(rel)
            if changed:
                self.version = self._versions()
            self._scanned = True
            version = self.version
            live = self._live_changes()
        if changed or live:
            for listener in self.listeners:
                listener(changed, version, live)
        return changed

    def _live_changes(self) -> set[str]:
        """The journals whose live-text sidecar appeared, changed or went away."""
        live = set()
        for rel, state in self._logs.items():
            if state.tail is None:
                continue
            stamp = file_stamp(live_path(state.file.path))
            if stamp != state.live_stamp:
                state.live_stamp = stamp
                live.add(rel)
        return live

    def _read(self, state: _Log) -> None:
        """(Re-)read a log's header and entry after its file changed."""
        state.error, state.not_a_log = None, False
        path, rel = state.file.path, state.file.relative
        try:
            if path.suffix == JOURNAL_SUFFIX:
                self._read_journal(state)
            else:
                self._read_log(state)
        except NotALogError:
            state.not_a_log, state.entry = True, None
        except LogFormatError as exc:
            state.error, state.entry = str(exc), None
        except OSError as exc:
            state.error, state.entry = f"{rel}: cannot read the log: {exc}.", None

    def _read_journal(self, state: _Log) -> None:
        path, rel = state.file.path, state.file.relative
        if state.tail is None:
            state.tail = JournalTail(path, self._versions)
        state.tail.update()
        header = state.tail.running_header()
        if header is None:
            raise LogFormatError(f"{rel}: the journal has no start record yet.")
        state.header = header
        final = state.tail.final
        if final is not None and "/" in rel:
            final = f"{rel.rsplit('/', 1)[0]}/{final}"
        state.entry = log_entry(
            rel,
            path,
            header,
            samples=len(state.tail.rows),
            version=state.tail.version(),
            final=final,
        )

    def _read_log(self, state: _Log) -> None:
        path = state.file.path
        self._unload(state.file.relative)
        header = read_log(path, header_only=True).header
        state.header = header
        state.entry = log_entry(
            state.file.relative,
            path,
            header,
            samples=count_samples(path),
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
                contents = load_contents(state.file.path, self._versions)
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
            stale = state is None or file_stamp(state.file.path) != state.file.stamp
        if stale or not self._scanned:
            self.refresh()
            with self._lock:
                state = self._logs.get(rel) or self._final_of(rel)
        if state is None or state.not_a_log:
            return None
        if state.error is not None:
            raise LogFormatError(state.error)
        return state

    def _final_of(self, rel: str) -> _Log | None:
        """The listed final log of the journal `rel` (the journal itself is no longer listed)."""
        stem = rel.removesuffix(JOURNAL_SUFFIX)
        if stem == rel:
            return None
        return self._logs.get(stem + ".json") or self._logs.get(stem + ".eval")

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
            try:
                with self._lock:
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
        samples = [
            {
                "key": sample_key(sample.id),
                "id": sample.id,
                "epoch": sample.epoch,
                "role": sample.role,
                "input": sample.input,
                "text": sample.text,
                "chars": sample.chars,
                "updated": sample.updated,
            }
            for sample in (document.samples if document is not None else [])
        ]
        return {
            "file": rel,
            "running": running,
            "updated": document.updated if document is not None else None,
            "samples": samples,
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
            return state.file.path

    def headers(self) -> dict[str, s.EvalLog]:
        """The header of every readable log, by relative path."""
        with self._lock:
            return {
                rel: st.header
                for rel, st in self._logs.items()
                if st.header is not None and st.entry is not None
            }
