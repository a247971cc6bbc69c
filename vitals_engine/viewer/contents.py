"""A log's samples for the viewer: summary rows, and each sample's JSON on demand.

Three readers, one interface (`Contents`):

- `JsonContents`: a `.json` log, decoded once with each sample kept as raw
  JSON (`msgspec.Raw`), so a sample is served as the log has it without
  being parsed twice.
- `EvalContents`: an Inspect `.eval` zip; rows from its `samples/` members,
  each sample read from its member when asked for.
- `JournalTail`: a running journal, read incrementally: each `update()`
  parses only the bytes appended since the last one (complete lines only)
  and remembers where every sample's line lies, so a growing journal costs
  what was appended, never its whole size. It merges the journal's provider
  batch records as they come (`batches`), without their requests.

Each row carries a version from a counter shared by the catalog, so a
client that has seen version V asks for the rows changed after V.
"""

from __future__ import annotations

import copy
import itertools
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from .._errors import LogFormatError
from ..log import schema as s
from ..log.decoding import decode_json
from ..log.eval_reader import ZipIndex
from ..log.journal_format import JOURNAL_VERSION, bulk_objects
from ..log.logged_batches import BatchSummary
from .paths import sample_key
from .rows import LiteSample, add_usage, lite_decoder, summary_row

__all__ = [
    "Contents",
    "EvalContents",
    "JournalTail",
    "JsonContents",
    "count_samples",
    "load_contents",
]

Versions = Callable[[], int]
SampleId = tuple[int | str, int]

_any_decoder = msgspec.json.Decoder()


def clean_json(data: bytes, path: Path, what: str = "") -> bytes:
    """JSON bytes safe for a browser's `JSON.parse`: bare NaN / Infinity become null.

    Example:
        >>> clean_json(b'{"value": NaN}', Path("a.eval"))
        b'{"value":null}'
    """
    if b"NaN" not in data and b"Infinity" not in data:
        return data
    return msgspec.json.encode(decode_json(_any_decoder, data, path, what))


def _lite(raw: msgspec.Raw, path: Path, what: str) -> LiteSample:
    """A raw sample's row fields (the slow path, with its clear error, only on failure)."""
    try:
        return lite_decoder.decode(raw)
    except msgspec.DecodeError:
        return decode_json(lite_decoder, bytes(raw), path, what)


@dataclass
class Contents:
    """Rows by (id, epoch) in log order, each with the version it last changed at.

    Example:
        >>> contents = load_contents(Path("logs/a.json"), counter())
        >>> [row["score"] for row in contents.rows_since(None)]
        ['C', 'I']
        >>> contents.sample_json(1, 1)[:10]
        b'{"id":1,"e'
    """

    path: Path
    created: int  # the version at which these contents were (re)loaded
    rows: dict[SampleId, tuple[int, dict[str, Any]]] = field(default_factory=dict)

    def set_row(self, sample: LiteSample, version: int) -> None:
        """Add or replace the row of `sample`, marked as changed at `version`."""
        self.rows[(sample.id, sample.epoch)] = (version, summary_row(sample, sample_key(sample.id)))

    def rows_since(self, since: int | None) -> Iterator[dict[str, Any]]:
        """Every row, or (with `since`) the rows changed after version `since`."""
        for version, row in self.rows.values():
            if since is None or version > since:
                yield row

    def version(self) -> int:
        """The latest version of any row (or of the load itself)."""
        return max((v for v, _ in self.rows.values()), default=self.created)

    def sample_json(self, id: int | str, epoch: int) -> bytes | None:
        """The sample's JSON as the log holds it (None if the log has no such sample)."""
        raise NotImplementedError


class _RawLog(msgspec.Struct):
    samples: list[msgspec.Raw] | None = None


_raw_log_decoder = msgspec.json.Decoder(_RawLog)


class JsonContents(Contents):
    """A whole `.json` log in memory, its samples as raw JSON (see `Contents`)."""

    def __init__(self, path: Path, versions: Versions) -> None:
        super().__init__(path, versions())
        self._raw: dict[SampleId, msgspec.Raw] = {}
        with bulk_objects():
            log = decode_json(_raw_log_decoder, path.read_bytes(), path)
            for index, raw in enumerate(log.samples or []):
                sample = _lite(raw, path, f"samples[{index}]")
                self.set_row(sample, self.created)
                self._raw[(sample.id, sample.epoch)] = raw

    def sample_json(self, id: int | str, epoch: int) -> bytes | None:
        """The sample's raw JSON, as the log holds it."""
        raw = self._raw.get((id, epoch))
        return bytes(raw) if raw is not None else None


_SAMPLE_MEMBER = re.compile(r"^samples/.+\.json$")


class EvalContents(Contents):
    """An Inspect `.eval` zip: rows from its sample members (see `Contents`)."""

    def __init__(self, path: Path, versions: Versions) -> None:
        super().__init__(path, versions())
        self._members: dict[SampleId, str] = {}
        with ZipIndex(path) as index, bulk_objects():
            for member in index.members():
                if _SAMPLE_MEMBER.match(member.name):
                    data = index.read(member)
                    sample = decode_json(lite_decoder, data, path, member.name)
                    self.set_row(sample, self.created)
                    self._members[(sample.id, sample.epoch)] = member.name

    def sample_json(self, id: int | str, epoch: int) -> bytes | None:
        """The sample's member, read from the zip (NaN written as null)."""
        name = self._members.get((id, epoch))
        if name is None:
            return None
        with ZipIndex(self.path) as index:
            member = index.find(name)
            if member is None:
                return None
            return clean_json(index.read(member), self.path, name)


class _Line(msgspec.Struct):
    kind: str
    journal: int | None = None
    log: str | None = None
    header: s.EvalLog | None = None
    sample: msgspec.Raw = msgspec.Raw(b"")  # msgspec has no `Raw | None`: empty when absent
    batch: msgspec.Raw = msgspec.Raw(b"")  # a batch record, read apart (`_batch`)


def _has_sample(record: _Line) -> bool:
    return len(record.sample) > 0 and bytes(record.sample) != b"null"


_line_decoder = msgspec.json.Decoder(_Line)
_batch_decoder = msgspec.json.Decoder(BatchSummary)


def _batch(raw: msgspec.Raw) -> BatchSummary | None:
    """A batch record without its requests; None for one this reader cannot read (a batch
    the page does not list is no reason to stop following the run's samples)."""
    try:
        return _batch_decoder.decode(raw) if len(raw) else None
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


class JournalTail(Contents):
    """A journal read incrementally: call `update()` whenever the file may have grown.

    Example:
        >>> tail = JournalTail(Path("logs/run.journal"), counter)
        >>> tail.update()      # True: something new was read
        >>> list(tail.rows_since(None))
    """

    def __init__(self, path: Path, versions: Versions) -> None:
        super().__init__(path, versions())
        self._versions = versions
        self._reset()

    def _reset(self) -> None:
        self.created = self._versions()
        self.rows = {}
        self.offset = 0  # bytes parsed: the next update reads from here
        self.identity: tuple[int, int] | None = None
        self.header: s.EvalLog | None = None
        self.final: str | None = None  # the final log's file name, from the start record
        self.damage: str | None = None
        self.model_usage: dict[str, s.ModelUsage] = {}
        self.role_usage: dict[str, s.ModelUsage] = {}
        #: The provider batches recorded so far, by key (each key's records merged in order).
        self.batches: dict[str, BatchSummary] = {}
        self._lines: dict[SampleId, tuple[int, int]] = {}

    def fork(self) -> JournalTail:
        """A copy to `update()` while readers keep using this one, which it then replaces.

        Copies the row, line and batch tables and the usage totals (`update()` changes them
        in place); rows, batch records and headers are never changed, so they are shared.
        """
        twin = copy.copy(self)
        twin.rows = dict(self.rows)
        twin._lines = dict(self._lines)
        twin.batches = dict(self.batches)
        twin.model_usage = {name: copy.copy(u) for name, u in self.model_usage.items()}
        twin.role_usage = {name: copy.copy(u) for name, u in self.role_usage.items()}
        return twin

    def update(self) -> bool:
        """Parse what was appended since the last call; True if anything changed.

        Raises `LogFormatError` if the file is not a journal.
        """
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return False
        identity = (st.st_dev, st.st_ino)
        if self.identity is not None and (identity != self.identity or st.st_size < self.offset):
            self._reset()  # replaced or truncated (a resumed run cuts a damaged tail)
        self.identity = identity
        if st.st_size <= self.offset:
            return False
        with self.path.open("rb") as fh:
            fh.seek(self.offset)
            data = fh.read(st.st_size - self.offset)
        end = data.rfind(b"\n")
        if end < 0:
            return False  # the line being written is not complete yet
        changed = False
        with bulk_objects():
            position = 0
            while position <= end:
                stop = data.index(b"\n", position)
                line = data[position:stop]
                at = self.offset + position
                if line.strip() and not self._record(line, at):
                    break
                changed = True
                position = stop + 1
        self.offset += position
        return changed

    def _record(self, line: bytes, at: int) -> bool:
        """Take one line in; False (and `damage` set) at a line that is not a record."""
        try:
            record = _line_decoder.decode(line)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            if at == 0:
                raise LogFormatError(f"{self.path}: not a journal: {exc}.") from None
            self.damage = f"byte {at}: {exc}"
            return False
        if at == 0:
            if record.kind != "start" or record.header is None:
                raise LogFormatError(f"{self.path}: not a journal: line 1 is not a start record.")
            if record.journal is None or record.journal > JOURNAL_VERSION:
                raise LogFormatError(
                    f"{self.path}: journal format version {record.journal} is not supported."
                )
            self.header, self.final = record.header, record.log
            return True
        self.damage = None
        if record.kind == "sample" and _has_sample(record):
            sample = _lite(record.sample, self.path, f"byte {at}")
            key = (sample.id, sample.epoch)
            if key not in self._lines:  # a re-scored sample replaces its row, not the usage
                add_usage(self.model_usage, sample.model_usage)
                add_usage(self.role_usage, sample.role_usage)
            self._lines[key] = (at, len(line))
            self.set_row(sample, self._versions())
        elif record.kind == "header" and record.header is not None:
            self.header = record.header
        elif record.kind == "batch" and (batch := _batch(record.batch)) is not None:
            known = self.batches.get(batch.key)
            self.batches[batch.key] = batch if known is None else known.merged(batch)
        return True

    def running_header(self) -> s.EvalLog | None:
        """The latest header, with usage summed over the samples while the run has none yet."""
        header = self.header
        if header is None:
            return None
        stats = header.stats
        if not stats.model_usage and not stats.role_usage:
            stats = msgspec.structs.replace(
                stats, model_usage=dict(self.model_usage), role_usage=dict(self.role_usage)
            )
            header = msgspec.structs.replace(header, stats=stats)
        return header

    def sample_json(self, id: int | str, epoch: int) -> bytes | None:
        """The sample from its journal line (the latest line for its id and epoch)."""
        place = self._lines.get((id, epoch))
        if place is None:
            return None
        at, length = place
        with self.path.open("rb") as fh:
            fh.seek(at)
            line = fh.read(length)
        record = _line_decoder.decode(line)
        if not _has_sample(record):
            return None
        return clean_json(bytes(record.sample), self.path, f"byte {at}")


#: `.json` logs up to this size are counted by decoding them (samples left as raw JSON).
COUNT_LIMIT = 64 * 1024 * 1024


def count_samples(path: Path) -> int | None:
    """How many samples a `.json` or `.eval` log holds, without parsing them (None if too big).

    An `.eval`'s sample members are counted in its zip directory; a `.json`
    up to `COUNT_LIMIT` bytes is decoded with its samples left as raw JSON.

    Example:
        >>> count_samples(Path("logs/2026-11-22T01-34-07-00-00_tiny_PtBns7u5sgd4CDAiTHbmg8.eval"))
        6
    """
    try:
        if path.suffix.lower() == ".eval":
            with ZipIndex(path) as index:
                return len({m.name for m in index.members() if _SAMPLE_MEMBER.match(m.name)})
        if path.stat().st_size > COUNT_LIMIT:
            return None
        log = decode_json(_raw_log_decoder, path.read_bytes(), path)
        return len(log.samples or [])
    except OSError as exc:
        raise LogFormatError(f"{path}: cannot read the log: {exc}.") from None


def load_contents(path: Path, versions: Versions) -> Contents:
    """The contents of a `.json` or `.eval` log (journals are `JournalTail`s).

    Raises `LogFormatError` for a log that cannot be read.

    Example:
        >>> len(load_contents(Path("logs/a.json"), counter()).rows)
        2
    """
    try:
        if path.suffix.lower() == ".eval":
            return EvalContents(path, versions)
        return JsonContents(path, versions)
    except OSError as exc:
        raise LogFormatError(f"{path}: cannot read the log: {exc}.") from None


def counter() -> Versions:
    """A thread-safe increasing counter (itertools.count's next is atomic in CPython).

    Example:
        >>> next_version = counter()
        >>> next_version(), next_version()
        (1, 2)
    """
    return itertools.count(1).__next__


def file_stamp(path: Path) -> tuple[int, int, int, int] | None:
    """(device, inode, size, mtime_ns) of a file, None if it is gone.

    Example:
        >>> file_stamp(Path("logs/gone.json")) is None
        True
    """
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
