"""Where the catalog finds logs: a local directory (`LocalSource`), or an object store
(`viewer/stored_source.py`), behind one small interface.

A source lists the logs (`files`), reads one's header and sample count (`header`),
gives a local file to load a log's samples from (`local`), says whether a listed
log changed (`stamp`) and whether a relative path from a URL is one of its files
(`knows`). Journals are always local files (a store's are rebuilt here
from its segments), which the catalog follows itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from ..log import schema as s
from ..log.reader import read_log
from .contents import count_samples, file_stamp
from .paths import LogFile, log_files, resolve_inside

__all__ = ["LocalSource", "Source"]


class Source(Protocol):
    """What the catalog asks of a log directory."""

    def files(self) -> list[LogFile]: ...

    def header(self, file: LogFile) -> tuple[s.EvalLog, int | None]: ...

    def local(self, file: LogFile) -> Path: ...

    def stamp(self, file: LogFile) -> tuple[int, int, int, int] | None: ...

    def knows(self, relative: str) -> bool: ...


class LocalSource:
    """The logs of a local directory (`root`, resolved).

    Example:
        >>> [f.relative for f in LocalSource(Path("logs").resolve()).files()]
        ['2026-01-14T16-19-11-06-00_simple-addition_add3e3e94f8e2faf092a58.json']
    """

    def __init__(self, root: Path) -> None:
        self.root = root

    def files(self) -> list[LogFile]:
        return list(log_files(self.root))

    def header(self, file: LogFile) -> tuple[s.EvalLog, int | None]:
        return read_log(file.path, header_only=True).header, count_samples(file.path)

    def local(self, file: LogFile) -> Path:
        return file.path

    def stamp(self, file: LogFile) -> tuple[int, int, int, int] | None:
        return file_stamp(file.path)

    def knows(self, relative: str) -> bool:
        """Whether `relative` (from a URL) is a file inside the directory."""
        return resolve_inside(self.root, relative) is not None
