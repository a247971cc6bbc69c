"""Writing logs: the run's journal as samples finish, then the final log.

The writer is the only actor that touches a run's files:

1. When a run starts it locks the journal (`journal_lock.py`: a second run
   resuming it is refused, told which process holds it), opens it beside the
   final log and writes the start record.
2. Each finished sample arrives already composed (`add()`, called by the
   run's sink) and is handed to the operating system at once, in the same
   event-loop turn: a killed process loses no finished sample, since the page
   cache outlives it. So does each model reply, the moment it arrives
   (`add_reply()`, from the reply journal layer: `chats/layers/replies.py`), so
   a resumed run does not buy it again. The actor fsyncs the journal at most
   once a second, in a worker thread, so a power cut costs at most about a
   second of samples.
3. A write or fsync that fails cuts the journal back to its last whole (or,
   after a failed fsync, last synced) record, keeps the lines it could not
   write, and stops the run with a `LogWriteError`; closing tries them again.
4. When the run ends (success, failure or cancellation) the writer appends
   the final header, fsyncs the journal, composes the final log from it
   (`.json`, or `.eval`: a zip of header.json, samples/, summaries.json and
   reductions.json, each sample's epochs reduced by the run's reducer, its
   config's `epochs_reducer`, else by the mean under no name, as Inspect),
   checking each sample it copies, has the caller read the new file back,
   moves it into place atomically, updates
   the directory's `listing.json`, and only then removes the journal and its
   lock.

A run killed before step 4 leaves its journal: `read_log()` reads it and
`eval(resume=...)` continues it.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import re
import secrets
import string
import zipfile
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import anyio.to_thread
import msgspec

from .._errors import LogWriteError, MetricError
from ..statistics.reducers import reduce_epochs
from ..vocab.batch_records import BatchRecord
from ..vocab.model_calls import JournaledReply
from . import schema as s
from .atomic import replace_atomically
from .journal_format import (
    encode_batch,
    encode_header,
    encode_reply,
    encode_sample,
    encode_start,
    journal_path,
    read_journal,
    written_key,
)
from .journal_lock import JournalLock
from .listing import update_listing

__all__ = [
    "LogWriter",
    "clean_task_name",
    "compose_final",
    "log_file_name",
    "new_id",
    "sample_member_name",
    "write_json_log",
]

_ALPHABET = string.ascii_letters + string.digits
_PLAIN_ID = re.compile(r"[A-Za-z0-9_.-]{1,200}")


def sample_member_name(sample_id: int | str, epoch: int) -> str:
    """The `.eval` member of one sample: Inspect's `samples/<id>_epoch_<n>.json` for an int
    id or a plain string one, else the id percent-encoded after a `~`, so that no two ids
    share a member (`1` and `"1"`), and no id leaves the `samples/` folder (`../x`). An
    id too long for a file name is named by its SHA-256 after a `#`.

    Example:
        >>> sample_member_name("../x", 1)
        'samples/~..%2Fx_epoch_1.json'
    """
    if isinstance(sample_id, int) or (
        _PLAIN_ID.fullmatch(sample_id) and not sample_id.isdigit() and sample_id.strip(".")
    ):
        return f"samples/{sample_id}_epoch_{epoch}.json"
    encoded = quote(str(sample_id), safe="")
    if len(encoded) > 200:
        encoded = "#" + hashlib.sha256(str(sample_id).encode("utf-8", "surrogatepass")).hexdigest()
    else:
        encoded = "~" + encoded
    return f"samples/{encoded}_epoch_{epoch}.json"


#: fsync the journal at most this often (seconds); every line reaches the OS at once.
SYNC_EVERY = 1.0

#: `os.open` flags of the journal (binary on Windows).
_BINARY = getattr(os, "O_BINARY", 0)


def new_id(length: int = 22) -> str:
    """A random id of letters and digits, as Inspect's run and eval ids are."""
    return "".join(secrets.choice(_ALPHABET) for _ in range(length))


def clean_task_name(name: str) -> str:
    """A task name safe for file names: `_` and spaces become `-`, others dropped."""
    name = re.sub(r"[_\s/:+]+", "-", name.strip())
    return re.sub(r"[^A-Za-z0-9-]", "", name) or "task"


def log_file_name(created: float, task: str, log_id: str, ext: str = "json") -> str:
    """`<YYYY-MM-DDTHH-MM-SS±HH-MM>_<task>_<id>.<ext>`, the name Inspect's viewer lists."""
    stamp = datetime.fromtimestamp(created).astimezone().isoformat(timespec="seconds")
    return f"{stamp.replace(':', '-')}_{clean_task_name(task)}_{log_id}.{ext}"


@contextlib.contextmanager
def writing(path: Path) -> Iterator[None]:
    """Turn an OS error while writing `path` (or its folder) into a `LogWriteError`."""
    try:
        yield
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise LogWriteError(f"{path}: cannot write the log: {reason}.", path=str(path)) from exc


def write_json_log(path: Path, log: s.EvalLog) -> Path:
    """Write a whole `log` (header and samples) as JSON to `path`, atomically."""
    with writing(path):
        return replace_atomically(path, lambda fh: fh.write(s.encoder.encode(log)), ".json")


# -- composing the final log from a journal ------------------------------------------------


class _Key(msgspec.Struct):
    id: int | str
    epoch: int


class _KeyLine(msgspec.Struct):
    kind: str
    sample: _Key | None = None


_key_decoder = msgspec.json.Decoder(_KeyLine)
_SAMPLE_PREFIX = b'{"kind":"sample","sample":'


def _span(offset: int, length: int) -> int:
    """Where a sample's JSON lies in the journal, as one int (a pair would cost a tuple
    and two ints per sample in memory: a hundred bytes, for runs of millions)."""
    return offset << 32 | length


def _index(journal: Path) -> dict[tuple[Any, int], int]:
    """(id, epoch) -> `_span` of the sample's JSON inside each line (last wins).

    Passes over a sample line that does not decode (`read_journal` warns of it), and
    stops at a last line cut short: what a crash left half-written.
    """
    index: dict[tuple[Any, int], int] = {}
    offset = 0
    with journal.open("rb") as fh:
        for line in fh:
            end = offset + len(line)
            if not line.endswith(b"\n"):
                break
            if line.startswith(_SAMPLE_PREFIX):
                try:
                    key = _key_decoder.decode(line).sample
                except msgspec.DecodeError:
                    key = None
                if key is not None:
                    start = offset + len(_SAMPLE_PREFIX)
                    index[(key.id, key.epoch)] = _span(start, end - 2 - start)  # drop "}\n"
            offset = end
    return index


def _ordered(
    index: dict[tuple[Any, int], int], order: Callable[[tuple[Any, int]], Any]
) -> list[tuple[tuple[Any, int], int]]:
    return sorted(index.items(), key=lambda item: order(item[0]))


def _samples(journal: Path, spans: Iterable[int]) -> Iterator[bytes]:
    """The journal's byte ranges (`_span`s), one positioned read each (no seek). (Not a
    memory map: its pages would count as the run's memory, as big as the journal.)"""
    fd = os.open(journal, os.O_RDONLY | _BINARY)
    try:
        for span in spans:
            yield os.pread(fd, span & 0xFFFFFFFF, span >> 32)
    finally:
        os.close(fd)


class _SampleKey(msgspec.Struct):
    id: int | str
    epoch: int


_sample_key_decoder = msgspec.json.Decoder(_SampleKey)


def _not_the_sample(journal: Path, key: tuple[Any, int], why: str) -> LogWriteError:
    return LogWriteError(
        f"{journal}: the journal's record of sample {key[0]!r} (epoch {key[1]}) {why}, so "
        "no final log was written. The journal is kept; resume the run to finish it.",
        path=str(journal),
    )


def _checked_samples(journal: Path, keyed: list[tuple[tuple[Any, int], int]]) -> Iterator[bytes]:
    """The samples' JSON from the journal, each parsed far enough to prove it whole and
    the sample expected (a stale offset would otherwise compose an unreadable log)."""
    ranges = [r for _, r in keyed]
    for (key, _), data in zip(keyed, _samples(journal, ranges), strict=True):
        try:
            got = _sample_key_decoder.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise _not_the_sample(journal, key, f"does not read back ({exc})") from exc
        if (got.id, got.epoch) != key:
            raise _not_the_sample(journal, key, f"reads back as {got.id!r}/{got.epoch}")
        yield data


_JOIN_BATCH = 256


def _write_joined(fh: Any, journal: Path, keyed: list[tuple[tuple[Any, int], int]]) -> None:
    """Write the journal's samples, comma-separated, in a few large writes."""
    samples = _checked_samples(journal, keyed)
    first = True
    while batch := list(itertools.islice(samples, _JOIN_BATCH)):
        if not first:
            fh.write(b",")
        fh.write(b",".join(batch))
        first = False


def _header_bytes(header: s.EvalLog) -> bytes:
    return s.encoder.encode(msgspec.structs.replace(header, samples=msgspec.UNSET))


Check = Callable[[Path], object]


def _compose_json(
    journal: Path,
    out: Path,
    header: s.EvalLog,
    keyed: list[tuple[tuple[Any, int], int]],
    check: Check | None,
) -> Path:
    head = _header_bytes(header)

    def write(fh: Any) -> None:
        fh.write(head[:-1] + b',"samples":[')
        _write_joined(fh, journal, keyed)
        fh.write(b"]}")

    return replace_atomically(out, write, ".json", check=check)


class _SummaryIn(s.EvalSampleSummary, kw_only=True):
    error: s.EvalError | None = None  # type: ignore[assignment]
    limit: s.EvalSampleLimit | None = None  # type: ignore[assignment]
    messages: list[msgspec.Raw] = msgspec.field(default_factory=list)  # counted, not decoded


_summary_decoder = msgspec.json.Decoder(_SummaryIn)


def _summary(sample: bytes) -> s.EvalSampleSummary:
    """A sample's summary line: what a viewer lists without opening the sample."""
    got = _summary_decoder.decode(sample)
    fields = msgspec.structs.asdict(got)
    fields["error"] = got.error.message if got.error is not None else None
    if got.limit is not None:
        fields["limit"], fields["limit_reason"] = got.limit.type, got.limit.reason
    fields["message_count"] = len(fields.pop("messages"))
    return s.EvalSampleSummary(**fields)


def _reducers(header: s.EvalLog) -> list[str | None]:
    """The run's epoch reducers, as its config names them (`eval.config.epochs_reducer`);
    without one, a reduction that names none (as Inspect writes it; it reduces by the mean)."""
    return list(header.eval.config.epochs_reducer or [None])


def _reduced(scores: list[s.LogScore], reducer: str | None) -> dict[str, Any]:
    """One sample's epoch scores (in epoch order) reduced by `reducer` with the run's own
    reducers (`statistics.reducers`), as an Inspect reduction; the answer and explanation
    are kept when every epoch has the same (as Inspect keeps them)."""
    values = [
        None if sc.value == s.NO_GRADE and sc.reason == s.NO_GRADE_REASON else sc.value
        for sc in scores
    ]
    reason = None
    try:
        value = reduce_epochs(values, reducer or "mean")
    except (MetricError, TypeError):  # scores this reducer cannot count (custom grades)
        value = scores[-1].value  # the log is still written; the metrics said why
    if value is None:  # no epoch scored (or fewer than pass_at_<k>'s k)
        value, reason = s.NO_GRADE, s.NO_GRADE_REASON
    answers = {sc.answer for sc in scores}
    explanations = {sc.explanation for sc in scores}
    reduction: dict[str, Any] = {
        "value": value,
        "answer": scores[0].answer if len(answers) == 1 else None,
        "explanation": scores[0].explanation if len(explanations) == 1 else None,
    }
    if reason is not None:
        reduction["reason"] = reason
    return reduction | {"history": []}


def _reductions(
    summaries: list[s.EvalSampleSummary], reducers: list[str | None]
) -> list[dict[str, Any]]:
    """Per scorer and reducer, each sample's scores over its epochs reduced to one, as
    Inspect's `reductions.json` holds them. Samples that failed are left out, as from the
    metrics."""
    by_scorer: dict[str, dict[Any, list[tuple[int, s.LogScore]]]] = {}
    for summary in summaries:
        if summary.error is not None:
            continue
        for scorer, score in (summary.scores or {}).items():
            epochs = by_scorer.setdefault(scorer, {}).setdefault(summary.id, [])
            epochs.append((summary.epoch, score))
    out = []
    for scorer, samples in by_scorer.items():
        for reducer in reducers:
            reduced = []
            for sample_id, epochs in samples.items():
                scores = [score for _, score in sorted(epochs, key=lambda e: e[0])]
                reduced.append(_reduced(scores, reducer) | {"sample_id": sample_id})
            out.append({"scorer": scorer, "reducer": reducer, "samples": reduced})
    return out


def _compose_eval(
    journal: Path,
    out: Path,
    header: s.EvalLog,
    keyed: list[tuple[tuple[Any, int], int]],
    check: Check | None,
) -> Path:
    def write(fh: Any) -> None:
        summaries: list[s.EvalSampleSummary] = []
        with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=5) as zf:
            ranges = [r for _, r in keyed]
            for ((sample_id, epoch), _), sample in zip(
                keyed, _samples(journal, ranges), strict=True
            ):
                key = (sample_id, epoch)
                try:
                    summary = _summary(sample)
                except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                    raise _not_the_sample(journal, key, f"does not read back ({exc})") from exc
                if (summary.id, summary.epoch) != key:
                    got = f"{summary.id!r}/{summary.epoch}"
                    raise _not_the_sample(journal, key, f"reads back as {got}")
                zf.writestr(sample_member_name(sample_id, epoch), sample)
                summaries.append(summary)
            zf.writestr("summaries.json", s.encoder.encode(summaries))
            if any(summary.scores for summary in summaries):
                reductions = _reductions(summaries, _reducers(header))
                zf.writestr("reductions.json", s.encoder.encode(reductions))
            zf.writestr("header.json", _header_bytes(header))

    return replace_atomically(out, write, ".eval", check=check)


def compose_final(
    journal: Path,
    out: Path,
    header: s.EvalLog,
    order: Callable[[tuple[Any, int]], Any] | None = None,
    index: dict[tuple[Any, int], int] | None = None,
    *,
    exclude: set[tuple[Any, int]] | frozenset[tuple[Any, int]] = frozenset(),
    check: Check | None = None,
) -> Path:
    """The final log at `out` (`.json` or `.eval` by its suffix) from the samples of
    `journal` and the given `header`; samples sorted by `order` of (id, epoch).

    `index` (where each sample's JSON lies in the journal) saves reading the journal
    twice when the caller wrote it; without one the journal is scanned. Samples keyed in
    `exclude` are left out. `check(path)` reads the new file back before it replaces
    anything (see `replace_atomically`)."""
    if index is None:
        index = _index(journal)
    if exclude:
        index = {key: where for key, where in index.items() if key not in exclude}
    keyed = _ordered(index, order or (lambda key: (str(key[0]), key[1])))
    if out.suffix == ".eval":
        return _compose_eval(journal, out, header, keyed, check)
    return _compose_json(journal, out, header, keyed, check)


# -- the actor -----------------------------------------------------------------------------


def write_fully(fd: int, data: bytes) -> None:
    """`os.write` until all of `data` is written (a write may take only part of it)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def sync_file(fd: int) -> None:
    """Flush `fd`'s written data to the disk."""
    os.fsync(fd)


Line = tuple[bytes, "tuple[Any, int] | None"]


class LogWriter:
    """Journal, then final log, for one run. See the module docstring.

    Example:
        >>> writer = LogWriter(path, header)
        >>> async with anyio.create_task_group() as tg:
        ...     await tg.start(writer.run)
        ...     writer.add(sample)        # from the sink, as samples finish
        ...     ...
        ...     writer.stop()
        >>> await writer.close(final_header)
        >>> writer.finalize(final_header)
    """

    def __init__(
        self,
        path: Path,
        header: s.EvalLog,
        *,
        order: Callable[[tuple[Any, int]], Any] | None = None,
        resume: bool = False,
        exclude: Iterable[tuple[Any, int]] = (),
    ) -> None:
        self.path = path
        self.journal = journal_path(path)
        self.header = header
        self.order = order
        self.lock = JournalLock(self.journal)
        #: Samples of the journal the final log leaves out (stale ones of a resumed run),
        #: until this writer writes them anew (keyed as the journal writes them).
        self.exclude = {written_key(key) for key in exclude}
        self._fd: int | None = None
        self._pending: list[Line] = []  # not yet written: before the journal opened, or failed
        self._unsynced: list[Line] = []  # written since the last fsync
        #: Where each sample's JSON lies in the journal, while this writer knows every line.
        self._index: dict[tuple[Any, int], int] | None = {}
        self._size = 0  # journal bytes that hold whole records
        self._synced = 0  # ... of which fsync'ed
        self._torn = False  # a failed write left bytes past `_size` that could not be cut
        self.failure: LogWriteError | None = None
        self._wake = anyio.Event()
        self._closed = False
        self._resume = resume
        self.finalized = False

    @property
    def written(self) -> int:
        """Bytes of the journal that hold whole records, handed to the operating system (a
        failed fsync cuts back to the last synced record, then writes the same lines again)."""
        return self._size

    # -- opening -----------------------------------------------------------------------

    def _open(self) -> None:
        with writing(self.journal):
            self.lock.acquire()
        try:
            with writing(self.journal):
                self._open_journal()
        except BaseException:
            self.release()
            raise
        self._write_pending()

    def _open_journal(self) -> None:
        self.journal.parent.mkdir(parents=True, exist_ok=True)
        if self._resume and self.journal.exists():
            damage = read_journal(self.journal).damage
            self._fd = os.open(self.journal, os.O_RDWR | os.O_APPEND | _BINARY)
            if damage is not None:  # cut a half-written last line before appending
                os.ftruncate(self._fd, damage.offset)
            self._size = self._synced = os.fstat(self._fd).st_size
            self._index = None  # lines written by an earlier run: scan when composing
            self._pending.insert(0, (encode_header(self.header), None))
            return
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND | _BINARY
        self._fd = os.open(self.journal, flags, 0o666)
        start = encode_start(self.header, self.path.name)
        write_fully(self._fd, start)
        sync_file(self._fd)
        self._size = self._synced = len(start)

    def _reopen(self) -> None:
        """Take the journal again after `release()`, to finish it."""
        with writing(self.journal):
            self.lock.acquire()
        try:
            with writing(self.journal):
                self._fd = os.open(self.journal, os.O_RDWR | os.O_APPEND | _BINARY)
        except BaseException:
            self.lock.release()
            raise
        size = os.fstat(self._fd).st_size
        if size != self._size:  # written by someone else since: scan it when composing
            self._index = None
        self._size = self._synced = size

    # -- writing -------------------------------------------------------------------------

    def add(self, sample: s.EvalSample) -> None:
        """Write one finished sample to the journal, now (never blocks on the disk's sync,
        never raises: a failed write is kept for `close()` and stops the run)."""
        self.add_many((sample,))

    def add_many(self, samples: Iterable[s.EvalSample]) -> None:
        """Write finished samples to the journal, now, in one write (see `add`)."""
        self.add_lines((encode_sample(x), (x.id, x.epoch)) for x in samples)

    def add_batch(self, record: BatchRecord) -> None:
        """Write what is known of a provider batch to the journal, now: before a batch is
        submitted, so that a run killed at any moment after knows its requests went out.
        Raises the `LogWriteError` of a failed write (the batch must not go out unrecorded)."""
        self._pending.append((encode_batch(record), None))
        if self._fd is not None and self.failure is None:
            self._write_pending()
        if self.failure is not None:
            raise self.failure

    def add_reply(self, reply: JournaledReply) -> None:
        """Write one model reply to the journal, now, as it arrives (never blocks on the
        disk's sync, never raises: a failed write stops the run, as for `add`)."""
        self.add_reply_lines((encode_reply(reply),))

    def add_reply_lines(self, lines: Iterable[bytes]) -> None:
        """Write replies already encoded as journal lines (`encode_reply`, as a Ray worker
        does), in one write (see `add_reply`)."""
        self._pending.extend((line, None) for line in lines)
        if self._fd is not None and self.failure is None:
            self._write_pending()

    def add_lines(self, lines: Iterable[tuple[bytes, tuple[Any, int]]]) -> None:
        """Write samples already encoded as journal lines (`encode_sample`, as a Ray
        worker does), each with its (id, epoch), in one write (see `add`)."""
        self._pending.extend(lines)
        if self._fd is not None and self.failure is None:
            self._write_pending()

    def _write_pending(self) -> None:
        if not self._pending:
            return
        try:
            self._write(self._pending)
        except LogWriteError as exc:
            self.failure = exc
            self._wake.set()  # the actor raises it
        else:
            self._pending = []

    def _write(self, lines: list[Line]) -> None:
        """Hand `lines` to the OS; on failure cut the journal back to its last whole record."""
        fd = self._fd
        assert fd is not None
        data = b"".join(line for line, _ in lines)
        with writing(self.journal):
            if self._torn:
                self._mend(fd)
            try:
                write_fully(fd, data)
            except OSError:
                self._cut_back(fd, self._size)
                raise
        index, offset, skip = self._index, self._size, len(_SAMPLE_PREFIX)
        for line, key in lines:
            if key is not None:
                key = written_key(key)  # as read back, a lone surrogate escaped
                self.exclude.discard(key)
                if index is not None:
                    index[key] = _span(offset + skip, len(line) - skip - 2)
            offset += len(line)
        self._size = offset
        self._unsynced.extend(lines)

    def _cut_back(self, fd: int, size: int) -> None:
        try:
            os.ftruncate(fd, size)
        except OSError:
            self._torn = True
        else:
            self._torn = False

    def _mend(self, fd: int) -> None:
        """Bytes a failed write left could not be cut: try again, else end them with a
        newline, so they read as one damaged line (skipped) rather than spoil the next."""
        self._cut_back(fd, self._size)
        if self._torn:
            write_fully(fd, b"\n")
            self._size = os.fstat(fd).st_size
            self._torn = False

    async def _sync(self) -> None:
        """fsync what was written since the last one. If it fails, the disk may hold any
        part of it: cut back to the last synced record and keep those lines to write again."""
        fd = self._fd
        if fd is None or not self._unsynced:
            return
        lines, size = self._unsynced, self._size
        self._unsynced = []
        try:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(sync_file, fd)
        except OSError as exc:
            self._pending = lines + self._unsynced + self._pending
            self._unsynced = []
            self._cut_back(fd, self._synced)
            self._size = self._synced
            self._index = None if self._torn else self._index
            reason = exc.strerror or str(exc)
            self.failure = LogWriteError(
                f"{self.journal}: cannot write the log: fsync failed: {reason}.",
                path=str(self.journal),
            )
            self.failure.__cause__ = exc
            raise self.failure from exc
        self._synced = size

    # -- the actor -----------------------------------------------------------------------

    async def run(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """The actor: open the journal, then fsync at most once a second until stopped;
        raise a write's failure as soon as it happens."""
        await anyio.to_thread.run_sync(self._open)
        task_status.started()
        while not self._closed and self.failure is None:
            with anyio.move_on_after(SYNC_EVERY):
                await self._wake.wait()
            self._wake = anyio.Event()
            if not self._closed and self.failure is None:
                await self._sync()
        if self.failure is not None:  # even when the run ended meanwhile: it must not pass
            raise self.failure

    def stop(self) -> None:
        """End the actor's loop; `close()` writes and syncs what is left."""
        self._closed = True
        self._wake.set()

    async def close(self, header: s.EvalLog | None = None) -> None:
        """Write what is left (and `header`, if given), fsync, and let go of the journal
        (it stays). Raises the `LogWriteError` of a write that fails again."""
        self.stop()
        if self._fd is None:
            return  # never opened (its lock was refused): nothing here is ours to write
        with anyio.CancelScope(shield=True):
            try:
                if header is not None:
                    self._pending.append((encode_header(header), None))
                self.failure = None
                self._write_pending()
                if self.failure is not None:
                    raise self.failure
                await self._sync()
            finally:
                self.release()  # the run is over; `finalize()` takes the journal again

    def release(self) -> None:
        """Close the journal and let go of its lock (the journal stays)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self.lock.release()

    def finalize(
        self, header: s.EvalLog, path: Path | None = None, check: Check | None = None
    ) -> Path:
        """Compose the final log (at `path`, default the writer's) from the journal with
        `header`, read it back through `check(path)`, update the listing, then remove the
        journal. Call after `close()`.

        Raises `LogWriteError` (the journal kept, whole, and let go of: a resume, or
        another call, finishes it) when anything fails."""
        target = path or self.path
        if target.suffix != self.path.suffix:
            target = target.with_suffix(self.path.suffix)
        if self._fd is None:
            self._reopen()
        try:
            self._compose(header, target, check)
        finally:
            self.release()
        self.finalized = True
        return target

    def _compose(self, header: s.EvalLog, target: Path, check: Check | None) -> None:
        """`finalize`'s work, with the journal taken: its last header, synced; the final
        log composed, read back and put in place; the listing; the journal removed."""
        fd = self._fd
        assert fd is not None
        self._pending.append((encode_header(header), None))
        self.failure = None
        self._write_pending()
        if self.failure is not None:
            raise self.failure
        with writing(self.journal):
            sync_file(fd)
        self._unsynced, self._synced = [], self._size
        with writing(target):
            compose_final(
                self.journal,
                target,
                header,
                self.order,
                self._index,
                exclude=self.exclude,
                check=check,
            )
            update_listing(target.parent, target.name, header)
            self.journal.unlink(missing_ok=True)
