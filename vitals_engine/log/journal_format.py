"""The run journal: what a running eval appends, so a crash loses nothing finished.

A journal is a JSON Lines file next to the final log, named
`<final log stem>.journal` (the log `2026-..._task_abc.json` journals into
`2026-..._task_abc.journal`). Each line is one JSON object ending in `\\n`:

```
{"journal": 1, "kind": "start", "log": "<final log file name>", "header": <EvalLog>}
{"kind": "sample", "sample": <EvalSample>}
{"kind": "sample", "sample": <EvalSample>}
{"kind": "reply", "reply": <JournaledReply>}
{"kind": "batch", "batch": <BatchRecord>}
{"kind": "header", "header": <EvalLog>}
```

- Line 1 is the start record: the format version (`journal`, now 1), the
  final log's file name, and the run's header (an `EvalLog` without samples,
  status "started"). A file whose first line is anything else is not a
  journal.
- A `sample` record is appended per finished (sample, epoch). A later record
  for the same (id, epoch) replaces an earlier one (a re-scored sample).
- A `header` record replaces the header; the latest one wins. The writer
  appends one when the run ends, just before it composes the final log, so a
  journal whose last header says "success" holds a whole run.
- A `reply` record is appended per model reply, the moment it arrives, before its
  sample can finish (`chats/layers/replies.py`): `{"sample", "epoch", "role", "call",
  "nth", "turn", "batch"}` (`vocab/model_calls.py`), the call keyed as the reply cache
  keys it (`call`: the digest of its provider, model and whole request; `nth`: its
  place among the identical calls of its sample stage) and `turn` the reply as it came
  back. A resumed run answers the same calls with them instead of sending them again.
  They count only for a (sample, epoch) with no `sample` record after them: a sample
  record (the sample finished) sets aside the replies before it, so a sample logged
  with an error runs again afresh, and a finished one is not run at all.
- A `batch` record says what is known of one provider batch (`vocab/batch_records.py`):
  before it is submitted, its endpoint and requests; after, its provider id; once
  it ended, its status and counts. Records of one batch (same `key`) are merged in
  order. A resumed run reattaches to the batches they name instead of sending their
  requests again.
- Records of an unknown `kind` are skipped, so later versions may add kinds;
  a start record with a `journal` version above 1 is refused.

A damaged line (not a valid record) in the middle of a journal is skipped
with a warning that says where (line number, byte offset, why); every record
after it still counts (`skipped`). Only the last line may be cut off by a
crash: it is reported as `damage`, and a writer resuming such a journal
truncates it at `damage.offset` first, never anywhere else.
"""

from __future__ import annotations

import gc
import mmap
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NamedTuple

import msgspec

from .._errors import LogFormatError
from .._logging import log
from ..vocab.batch_records import BatchRecord
from ..vocab.model_calls import JournaledReply
from ..vocab.text import WritableEncoder, writable_text
from . import schema as s

__all__ = [
    "JOURNAL_SUFFIX",
    "JOURNAL_VERSION",
    "JournalContents",
    "JournalDamage",
    "JournalHeader",
    "JournalReply",
    "JournalSample",
    "JournalStart",
    "decode_reply",
    "encode_batch",
    "encode_header",
    "encode_reply",
    "encode_sample",
    "encode_start",
    "encoder",
    "journal_path",
    "one_line",
    "read_journal",
    "read_journal_batches",
    "read_journal_header",
    "read_journal_replies",
    "written_key",
]

JOURNAL_VERSION = 1
JOURNAL_SUFFIX = ".journal"


class JournalStart(msgspec.Struct, kw_only=True):
    """Line 1: the format version, the final log's file name and the run's header."""

    journal: int = JOURNAL_VERSION
    kind: Literal["start"] = "start"
    log: str
    header: s.EvalLog


class JournalSample(msgspec.Struct, kw_only=True):
    """One finished (sample, epoch)."""

    kind: Literal["sample"] = "sample"
    sample: s.EvalSample


class JournalHeader(msgspec.Struct, kw_only=True):
    """A newer header (status, results, stats); the latest one wins."""

    kind: Literal["header"] = "header"
    header: s.EvalLog


class JournalBatch(msgspec.Struct, kw_only=True):
    """What is known of one provider batch; merged with the earlier records of its key."""

    kind: Literal["batch"] = "batch"
    batch: BatchRecord


class JournalReply(msgspec.Struct, kw_only=True):
    """One model reply, journaled as it arrived; keyed like the reply cache."""

    kind: Literal["reply"] = "reply"
    reply: JournaledReply


class _Line(msgspec.Struct):
    """Any record, as read: which fields are set depends on `kind`."""

    kind: str
    journal: int | None = None
    log: str | None = None
    header: s.EvalLog | None = None
    sample: s.EvalSample | None = None
    batch: BatchRecord | None = None
    reply: msgspec.Raw = msgspec.Raw()  # empty when absent; decoded only if its sample
    # did not finish


class _ReplySample(msgspec.Struct):
    """The (sample, epoch) of a reply record, read without its reply."""

    sample: int | str
    epoch: int


_reply_sample_decoder = msgspec.json.Decoder(_ReplySample)
_reply_decoder = msgspec.json.Decoder(JournaledReply)
_journal_reply_decoder = msgspec.json.Decoder(JournalReply)

encoder = WritableEncoder(enc_hook=s.enc_hook)  # lone surrogates as escapes (vocab/text.py)


@contextmanager
def bulk_objects() -> Iterator[None]:
    """No cyclic GC while building many small objects (each pass would rescan them all)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


_line_decoder = msgspec.json.Decoder(_Line)


def _no_samples(header: s.EvalLog) -> s.EvalLog:
    if header.samples is msgspec.UNSET:
        return header
    return msgspec.structs.replace(header, samples=msgspec.UNSET)


def encode_start(header: s.EvalLog, log_name: str) -> bytes:
    """The journal's first line, for the final log named `log_name` (samples are left out)."""
    return encoder.encode(JournalStart(log=log_name, header=_no_samples(header))) + b"\n"


def encode_sample(sample: s.EvalSample) -> bytes:
    """The line of one finished (sample, epoch)."""
    return encoder.encode(JournalSample(sample=one_line(sample))) + b"\n"


_NEWLINE = re.compile(b"\n")


def one_line(sample: s.EvalSample) -> s.EvalSample:
    """The sample with its raw JSON parts made one line each: parts kept as read from a
    pretty-printed log would break the journal's lines (the check copies nothing)."""
    for name in ("events", "events_data"):
        raw = getattr(sample, name)
        if _NEWLINE.search(memoryview(raw)) is not None:
            compact = msgspec.Raw(msgspec.json.format(bytes(raw), indent=0))
            sample = msgspec.structs.replace(sample, **{name: compact})
    return sample


def encode_header(header: s.EvalLog) -> bytes:
    """A header line (samples are left out); the latest one read wins."""
    return encoder.encode(JournalHeader(header=_no_samples(header))) + b"\n"


def encode_reply(reply: JournaledReply) -> bytes:
    """The line of one model reply, as it arrived."""
    return encoder.encode(JournalReply(reply=reply)) + b"\n"


def decode_reply(line: bytes) -> JournaledReply:
    """The reply of a line made by `encode_reply`."""
    return _journal_reply_decoder.decode(line).reply


def written_key(key: tuple[Any, int]) -> tuple[Any, int]:
    """A sample's (id, epoch) as its journal (and its log) holds it: a lone surrogate in
    a string id written as its escape (`vocab/text.py`). What a journal reads back has
    this form; a key made live is brought to it before the two are compared. Any other
    key is returned as it is."""
    sample_id = key[0]
    if isinstance(sample_id, str) and not sample_id.isascii():
        written = writable_text(sample_id)
        if written is not sample_id:
            return (written, key[1])
    return key


def encode_batch(record: BatchRecord) -> bytes:
    """The line of what is known of a provider batch."""
    return encoder.encode(JournalBatch(batch=record)) + b"\n"


def journal_path(log_path: str | Path) -> Path:
    """Where the journal of the final log `log_path` lies: same stem, `.journal`."""
    path = Path(log_path)
    return path.with_name(path.stem + JOURNAL_SUFFIX)


@dataclass(frozen=True, slots=True)
class JournalDamage:
    """Where a journal stops being readable: 1-based line, byte offset of its start, why."""

    line: int
    offset: int
    reason: str

    def __str__(self) -> str:
        return f"line {self.line} (byte {self.offset}): {self.reason}"


class JournalContents(NamedTuple):
    """What a journal holds: the latest header, the samples, a damaged last line (`damage`,
    what a crash mid-write leaves), the damaged lines before it that were skipped, the
    provider batches the run sent (each key's records merged), and the model replies of
    samples that did not finish (those after their sample's last record, if any)."""

    header: s.EvalLog
    samples: list[s.EvalSample]
    damage: JournalDamage | None
    skipped: tuple[JournalDamage, ...] = ()
    batches: tuple[BatchRecord, ...] = ()
    replies: tuple[JournaledReply, ...] = ()


def _reason(exc: Exception, complete: bool) -> str:
    if not complete:
        return f"incomplete line ({exc})"
    return str(exc)


def read_journal(path: str | Path) -> JournalContents:
    """Read a journal: the latest header, one sample per (id, epoch), and where it broke.

    Raises `LogFormatError` if the file is missing or its first line is not a
    start record.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise LogFormatError(f"{path}: the journal does not exist.") from None
    except OSError as exc:
        raise LogFormatError(f"{path}: cannot read the journal: {exc}") from None

    end = data.find(b"\n")
    first = data if end < 0 else data[:end]
    try:
        start = _line_decoder.decode(first)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise LogFormatError(
            f"{path}: not a journal: line 1 (byte 0) is not a start record ({exc})."
        ) from None
    if start.kind != "start" or start.header is None or start.log is None:
        raise LogFormatError(
            f"{path}: not a journal: line 1 (byte 0) is a {start.kind!r} record, "
            "not the start record."
        )
    if start.journal is None or start.journal > JOURNAL_VERSION:
        raise LogFormatError(
            f"{path}: journal format version {start.journal} is not supported "
            f"(this version of vitals-engine reads version {JOURNAL_VERSION})."
        )

    with bulk_objects():
        records = _Records(start.header)
        damage = records.read(data, len(first) + 1)
    for bad in records.skipped:
        log.warning(f"{path}: skipped a damaged journal line, {bad}; the records after it are read")
    return JournalContents(
        _no_samples(records.header),
        list(records.samples.values()),
        damage,
        tuple(records.skipped),
        tuple(records.batches.values()),
        records.unfinished_replies(),
    )


class _Records:
    """The records after the start line, as they are read: the latest header, one sample
    per (id, epoch), the batches, the damaged lines skipped, and the replies of each
    (id, epoch) since its last sample record (kept undecoded until the end)."""

    def __init__(self, header: s.EvalLog) -> None:
        self.header = header
        self.samples: dict[tuple[int | str, int], s.EvalSample] = {}
        self.batches: dict[str, BatchRecord] = {}
        self.skipped: list[JournalDamage] = []
        self.replies: dict[tuple[int | str, int], list[msgspec.Raw]] = {}

    def read(self, data: bytes, offset: int) -> JournalDamage | None:
        """Read the records of `data` from `offset`; return a damaged last line, if any."""
        view = memoryview(data)
        line_no = 1
        size = len(data)
        while offset < size:
            line_no += 1
            end = data.find(b"\n", offset)
            complete = end >= 0
            line = view[offset:] if end < 0 else view[offset:end]
            if len(line) > 1 or (len(line) == 1 and not bytes(line).isspace()):
                bad = self._take(line, complete)
                if bad is not None:
                    problem = JournalDamage(line_no, offset, bad)
                    if end < 0 or not data[end + 1 :].strip():  # the last line: a cut write
                        return problem
                    self.skipped.append(problem)
            offset = size if end < 0 else end + 1
        return None

    def _take(self, line: memoryview, complete: bool) -> str | None:
        """Take one record; return why it is damaged, if it is."""
        try:
            record = _line_decoder.decode(line)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            return _reason(exc, complete)
        kind = record.kind
        if kind == "sample" and record.sample is not None:
            sample = record.sample
            key = (sample.id, sample.epoch)
            self.samples[key] = sample
            self.replies.pop(key, None)  # it finished: its replies are spent
        elif kind == "reply" and len(record.reply):
            try:
                of = _reply_sample_decoder.decode(record.reply)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                return f"a 'reply' record without its call ({exc})"
            self.replies.setdefault((of.sample, of.epoch), []).append(record.reply)
        elif kind == "header" and record.header is not None:
            self.header = record.header
        elif kind == "batch" and record.batch is not None:
            _merge(self.batches, record.batch)
        elif kind == "start":
            return "a second start record"
        elif kind in ("sample", "header", "batch", "reply"):
            return f"a {kind!r} record lacks its body"
        return None

    def unfinished_replies(self) -> tuple[JournaledReply, ...]:
        """The replies of samples that did not finish after them, decoded."""
        found: list[JournaledReply] = []
        for raws in self.replies.values():
            for raw in raws:
                try:
                    found.append(_reply_decoder.decode(raw))
                except (msgspec.DecodeError, msgspec.ValidationError):
                    continue  # its call goes out again
        return tuple(found)


def _merge(batches: dict[str, BatchRecord], record: BatchRecord) -> None:
    known = batches.get(record.key)
    batches[record.key] = record if known is None else known.merged(record)


_BATCH_PREFIX = b'{"kind":"batch",'
_batch_decoder = msgspec.json.Decoder(JournalBatch)


def read_journal_batches(path: str | Path) -> tuple[BatchRecord, ...]:
    """The provider batches a journal records (each key's records merged), without
    decoding its samples. Lines that do not decode are passed over."""
    batches: dict[str, BatchRecord] = {}
    for line in _whole_lines(path):
        if line.startswith(_BATCH_PREFIX):
            try:
                _merge(batches, _batch_decoder.decode(line).batch)
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue
    return tuple(batches.values())


def _whole_lines(path: str | Path) -> Iterator[bytes]:
    """The lines of a journal up to its first one cut short (none if it is missing).
    Raises `LogFormatError` when it cannot be read."""
    try:
        with Path(path).open("rb") as fh:
            for line in fh:
                if not line.endswith(b"\n"):
                    return
                yield line
    except FileNotFoundError:
        return
    except OSError as exc:
        raise LogFormatError(f"{path}: cannot read the journal: {exc}") from None


class _SampleOf(msgspec.Struct):
    """The (id, epoch) of a sample record's sample, read without the rest of it."""

    id: int | str
    epoch: int


class _SampleLine(msgspec.Struct):
    sample: _SampleOf


_SAMPLE_PREFIX = b'{"kind":"sample",'
_REPLY_PREFIX = b'{"kind":"reply",'
_sample_line_decoder = msgspec.json.Decoder(_SampleLine)
_reply_line_decoder = msgspec.json.Decoder(JournalReply)


def read_journal_replies(path: str | Path) -> tuple[JournaledReply, ...]:
    """The replies a journal holds of the samples that did not finish after them (see the
    module docstring), without decoding its samples; lines that do not decode are passed
    over. What a stopped run's log keeps, for a resume of it."""
    replies: dict[tuple[int | str, int], list[JournaledReply]] = {}
    for line in _whole_lines(path):
        try:
            if line.startswith(_REPLY_PREFIX):
                reply = _reply_line_decoder.decode(line).reply
                replies.setdefault((reply.sample, reply.epoch), []).append(reply)
            elif line.startswith(_SAMPLE_PREFIX):
                of = _sample_line_decoder.decode(line).sample
                replies.pop((of.id, of.epoch), None)
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
    return tuple(reply for kept in replies.values() for reply in kept)


_HEADER_LINE = b'\n{"kind":"header"'


#: How far from its end a header-only read looks for a later header record.
_TAIL = 1 << 20


def read_journal_header(path: str | Path) -> s.EvalLog:
    """A journal's header without decoding samples, in time that does not grow with it.

    It is the header record in the journal's last megabyte if there is one (a
    finished or resumed run writes one), else the start record's. A run
    resumed long ago may therefore show its first header here; `read_journal`
    always has the latest. Raises `LogFormatError` like `read_journal` for a
    missing file or a bad start line.
    """
    path = Path(path)
    try:
        with path.open("rb") as fh:
            first = fh.readline()
            size = fh.seek(0, 2)
            latest: bytes | None = None
            if first.endswith(b"\n") and size > len(first):
                with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as view:
                    at = view.rfind(_HEADER_LINE, max(len(first) - 1, size - _TAIL))
                    if at >= 0:
                        end = view.find(b"\n", at + 1)
                        latest = view[at + 1 : end if end >= 0 else size]
    except FileNotFoundError:
        raise LogFormatError(f"{path}: the journal does not exist.") from None
    except OSError as exc:
        raise LogFormatError(f"{path}: cannot read the journal: {exc}") from None
    try:
        start = _line_decoder.decode(first)
        record = _line_decoder.decode(latest) if latest is not None else start
    except (msgspec.DecodeError, msgspec.ValidationError):
        return read_journal(path).header  # a bad line: the full reader says where, or recovers
    if start.kind != "start" or start.header is None or record.header is None:
        return read_journal(path).header
    return _no_samples(record.header)
