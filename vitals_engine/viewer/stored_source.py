"""The viewer's logs in an object store: listed in one request, headers read in ranges.

A listing asks the store for its objects once (with their sizes and tags); a log's
header is read only when its object changed (a few ranged reads, however big the log);
its samples are read from a local copy fetched when a page first asks for them. A
running journal is followed from its shipped segments, appended to a local copy as
they arrive (`storage.segments.catch_up`), so the catalog follows it as a local one.
A store that stops answering leaves the last listing in place, said once.
"""

from __future__ import annotations

from pathlib import Path

from .._errors import LogFormatError, StoreError
from .._logging import log
from ..log import schema as s
from ..log.stored import stored_header, stored_logs
from ..storage.location import Store, StoredObject
from ..storage.segments import catch_up, journals
from ..storage.staging import mirror_dir
from ..storage.sync import pull_log
from .contents import file_stamp
from .paths import LogFile

__all__ = ["StoredSource"]

_JOURNAL = ".journal"


class StoredSource:
    """The logs of `store`, for a `Catalog` rooted at `mirror_dir(store.url)`.

    Example:
        >>> source = StoredSource(Store("s3://team-evals/qa"))
        >>> catalog = Catalog(source.root, source=source)
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self.root = mirror_dir(store.url)
        self.root.mkdir(parents=True, exist_ok=True)
        self._objects: dict[str, StoredObject] = {}
        self._last: list[LogFile] = []
        self._down = False

    def files(self) -> list[LogFile]:
        try:
            found = self._list()
        except StoreError as exc:
            if not self._down:
                log.warning(f"the viewer cannot list the store: {exc}", url=self.store.url)
            self._down = True
            return self._last
        if self._down:
            log.warning("the viewer lists the store again", url=self.store.url)
        self._down, self._last = False, found
        return found

    def _list(self) -> list[LogFile]:
        objects = {obj.name: obj for obj in stored_logs(self.store)}
        found = []
        for name, obj in objects.items():
            if not _plain(name):
                continue
            stamp = (0, hash(obj.tag) & 0xFFFFFFFF, obj.size, int(obj.modified * 1e9))
            found.append(LogFile(name, self.root / name, stamp))
        finals = {name.rsplit(".", 1)[0] for name in objects}
        for journal in journals(self.store):
            if journal.removesuffix(_JOURNAL) in finals or not _plain(journal):
                continue
            local = self.root / journal
            catch_up(self.store, journal, local)
            stamp = file_stamp(local)
            if stamp is not None:
                found.append(LogFile(journal, local, stamp))
        self._objects = objects
        found.sort(key=lambda f: f.relative)
        return found

    def header(self, file: LogFile) -> tuple[s.EvalLog, int | None]:
        try:
            return stored_header(self.store, file.relative), None
        except StoreError as exc:
            raise LogFormatError(str(exc)) from None
        except FileNotFoundError:
            raise LogFormatError(f"{self.store.url_of(file.relative)}: gone.") from None

    def local(self, file: LogFile) -> Path:
        obj = self._objects.get(file.relative)
        if obj is None or file.relative.endswith(_JOURNAL):
            return file.path
        try:
            return pull_log(self.store, obj, file.path)
        except (StoreError, FileNotFoundError) as exc:
            raise LogFormatError(f"{self.store.url_of(file.relative)}: {exc}") from None

    def stamp(self, file: LogFile) -> tuple[int, int, int, int] | None:
        if file.relative.endswith(_JOURNAL):
            return file_stamp(file.path)
        return file.stamp if file.relative in self._objects else None

    def knows(self, relative: str) -> bool:
        """Whether `relative` is a log of the last listing (or a journal followed here)."""
        if relative in self._objects:
            return True
        return relative.endswith(_JOURNAL) and any(f.relative == relative for f in self._last)


def _plain(name: str) -> bool:
    """A name that is a plain relative path here (no `..`, no empty or hidden part)."""
    parts = name.split("/")
    return "\\" not in name and all(part and not part.startswith(".") for part in parts)
