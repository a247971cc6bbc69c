"""Which reader reads which log: the dispatch on the suffix (`.json`, `.eval`, `.journal`).

Invariant: whatever goes wrong with the file (missing, a directory, not a
regular file such as a FIFO, an unknown suffix, an OS error, a damaged log)
raises `LogFormatError` naming it.
"""

from __future__ import annotations

from pathlib import Path

from .._errors import LogFormatError
from . import schema as s
from .eval_reader import eval_log
from .journal_format import JournalDamage, read_journal, read_journal_header
from .json_reader import json_header, json_log

__all__ = ["LOG_SUFFIXES", "read_parts"]

LOG_SUFFIXES = (".json", ".eval", ".journal")


def read_parts(
    path: str | Path, header_only: bool
) -> tuple[s.EvalLog, list[s.EvalSample], JournalDamage | None]:
    """A log's header, its samples ([] when `header_only`) and where a journal broke."""
    path = Path(path)
    if not path.exists():
        raise LogFormatError(f"{path}: the log does not exist.")
    if path.is_dir():
        raise LogFormatError(f"{path} is a directory, not a log; read_logs() reads directories.")
    if not path.is_file():
        # a FIFO, socket or device: opening or reading it could block forever
        raise LogFormatError(f"{path}: not a regular file, so not a log.")
    suffix = path.suffix.lower()
    try:
        if suffix == ".journal":
            if header_only:
                return read_journal_header(path), [], None
            contents = read_journal(path)
            return contents.header, contents.samples, contents.damage
        if suffix == ".eval":
            header, samples = eval_log(path, header_only)
        elif suffix == ".json":
            if header_only:
                header, samples = json_header(path), []
            else:
                header, samples = json_log(path)
        else:
            raise LogFormatError(
                f"{path}: not a log file: expected a .json, .eval or .journal file."
            )
    except OSError as exc:
        raise LogFormatError(f"{path}: cannot read the log: {exc}.") from None
    return header, samples, None
