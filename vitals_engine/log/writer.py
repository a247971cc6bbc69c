"""Writing logs: the run's journal as samples finish, then the final log.

The writer is the only actor that touches a run's files:

1. When a run starts it opens the journal (`journal_format.py`) beside the
   final log and writes the start record.
2. Each finished sample arrives already encoded (`add()`, called by the
   run's sink; the work per sample is that sample's encoding, never the
   log's size). The writer actor appends what has arrived in batches, at
   least once a second, in a worker thread so the event loop never waits on
   the disk. A sample is on disk within about a second of finishing.
3. When the run ends (success, failure or cancellation) the writer appends
   the final header, fsyncs the journal, composes the final log from it
   (`.json`, or `.eval`: a zip of header.json, samples/, summaries.json and
   reductions.json), moves it into place atomically, updates the directory's
   `listing.json`, and only then removes the journal.

A run killed before step 3 leaves its journal: `read_log()` reads it and
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

from .._errors import LogWriteError
from . import schema as s
from .atomic import replace_atomically
from .journal_format import (
    encode_header,
    encode_sample,
    encode_start,
    journal_path,
    read_journal,
)
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


#: Flush the journal at least this often (seconds), and whenever this many samples wait.
FLUSH_EVERY = 1.0
FLUSH_BATCH = 512


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


def _index(journal: Path) -> dict[tuple[Any, int], tuple[int, int]]:
    """(id, epoch) -> (offset, length) of the sample's JSON inside each line (last wins).

    Passes over a sample line that does not decode (`read_journal` warns of it), and
    stops at a last line cut short: what a crash left half-written.
    """
    index: dict[tuple[Any, int], tuple[int, int]] = {}
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
                    index[(key.id, key.epoch)] = (start, end - 2 - start)  # drop "}\n"
            offset = end
    return index


def _ordered(
    index: dict[tuple[Any, int], tuple[int, int]], order: Callable[[tuple[Any, int]], Any]
) -> list[tuple[tuple[Any, int], tuple[int, int]]]:
    return sorted(index.items(), key=lambda item: order(item[0]))


def _samples(journal: Path, ranges: Iterable[tuple[int, int]]) -> Iterator[bytes]:
    """The journal's byte `ranges`, one positioned read each (no seek). (Not a memory map:
    its pages would count as the run's memory, as big as the journal.)"""
    fd = os.open(journal, os.O_RDONLY)
    try:
        for start, length in ranges:
            yield os.pread(fd, length, start)
    finally:
        os.close(fd)


_JOIN_BATCH = 256


def _write_joined(fh: Any, journal: Path, ranges: list[tuple[int, int]]) -> None:
    """Write the journal's `ranges`, comma-separated, in a few large writes."""
    samples = _samples(journal, ranges)
    first = True
    while batch := list(itertools.islice(samples, _JOIN_BATCH)):
        if not first:
            fh.write(b",")
        fh.write(b",".join(batch))
        first = False


def _header_bytes(header: s.EvalLog) -> bytes:
    return s.encoder.encode(msgspec.structs.replace(header, samples=msgspec.UNSET))


def _compose_json(
    journal: Path, out: Path, header: s.EvalLog, ranges: list[tuple[int, int]]
) -> Path:
    head = _header_bytes(header)

    def write(fh: Any) -> None:
        fh.write(head[:-1] + b',"samples":[')
        _write_joined(fh, journal, ranges)
        fh.write(b"]}")

    return replace_atomically(out, write, ".json")


class _SummaryIn(s.EvalSampleSummary, kw_only=True):
    error: s.EvalError | None = None  # type: ignore[assignment]
    messages: list[msgspec.Raw] = msgspec.field(default_factory=list)  # counted, not decoded


_summary_decoder = msgspec.json.Decoder(_SummaryIn)


def _summary(sample: bytes) -> s.EvalSampleSummary:
    """A sample's summary line: what a viewer lists without opening the sample."""
    got = _summary_decoder.decode(sample)
    fields = msgspec.structs.asdict(got)
    fields["error"] = got.error.message if got.error is not None else None
    fields["message_count"] = len(fields.pop("messages"))
    return s.EvalSampleSummary(**fields)


def _reductions(summaries: list[s.EvalSampleSummary]) -> list[dict[str, Any]]:
    """Per scorer, each sample's score averaged over its epochs (as Inspect's mean reducer)."""
    from ..metrics import numeric_value

    by_scorer: dict[str, dict[Any, list[Any]]] = {}
    for summary in summaries:
        for scorer, score in (summary.scores or {}).items():
            by_scorer.setdefault(scorer, {}).setdefault(summary.id, []).append(score)
    out = []
    for scorer, samples in by_scorer.items():
        reduced = []
        for sample_id, scores in samples.items():
            values = [numeric_value(sc.value) for sc in scores]
            known = [v for v in values if v is not None]
            value: Any = sum(known) / len(known) if known else scores[-1].value
            last = scores[-1]
            reduced.append(
                {
                    "value": value,
                    "answer": last.answer,
                    "explanation": last.explanation,
                    "history": [],
                    "sample_id": sample_id,
                }
            )
        out.append({"scorer": scorer, "reducer": "mean", "samples": reduced})
    return out


def _compose_eval(
    journal: Path,
    out: Path,
    header: s.EvalLog,
    keyed: list[tuple[tuple[Any, int], tuple[int, int]]],
) -> Path:
    def write(fh: Any) -> None:
        summaries: list[s.EvalSampleSummary] = []
        with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=5) as zf:
            ranges = [r for _, r in keyed]
            for ((sample_id, epoch), _), sample in zip(
                keyed, _samples(journal, ranges), strict=True
            ):
                zf.writestr(sample_member_name(sample_id, epoch), sample)
                summaries.append(_summary(sample))
            zf.writestr("summaries.json", s.encoder.encode(summaries))
            if any(summary.scores for summary in summaries):
                zf.writestr("reductions.json", s.encoder.encode(_reductions(summaries)))
            zf.writestr("header.json", _header_bytes(header))

    return replace_atomically(out, write, ".eval")


def compose_final(
    journal: Path,
    out: Path,
    header: s.EvalLog,
    order: Callable[[tuple[Any, int]], Any] | None = None,
    index: dict[tuple[Any, int], tuple[int, int]] | None = None,
) -> Path:
    """The final log at `out` (`.json` or `.eval` by its suffix) from the samples of
    `journal` and the given `header`; samples sorted by `order` of (id, epoch).

    `index` (where each sample's JSON lies in the journal) saves reading the journal
    twice when the caller wrote it; without one the journal is scanned."""
    if index is None:
        index = _index(journal)
    keyed = _ordered(index, order or (lambda key: (str(key[0]), key[1])))
    if out.suffix == ".eval":
        return _compose_eval(journal, out, header, keyed)
    return _compose_json(journal, out, header, [r for _, r in keyed])


# -- the actor -----------------------------------------------------------------------------


class LogWriter:
    """Journal, then final log, for one run. See the module docstring.

    Example:
        >>> writer = LogWriter(path, header)
        >>> async with anyio.create_task_group() as tg:
        ...     await tg.start(writer.run)
        ...     writer.add(sample)        # from the sink, as samples finish
        ...     ...
        >>> await writer.finish(final_header)
    """

    def __init__(
        self,
        path: Path,
        header: s.EvalLog,
        *,
        order: Callable[[tuple[Any, int]], Any] | None = None,
        resume: bool = False,
    ) -> None:
        self.path = path
        self.journal = journal_path(path)
        self.header = header
        self.order = order
        self._pending: list[tuple[bytes, tuple[Any, int] | None]] = []
        #: Where each sample's JSON lies in the journal, while this writer knows every line.
        self._index: dict[tuple[Any, int], tuple[int, int]] | None = {}
        self._size = 0
        self._wake = anyio.Event()
        self._closed = False
        self._resume = resume
        self.written = 0
        self.finalized = False

    def _open(self) -> None:
        with writing(self.journal):
            self._open_journal()

    def _open_journal(self) -> None:
        self.journal.parent.mkdir(parents=True, exist_ok=True)
        if self._resume and self.journal.exists():
            damage = read_journal(self.journal).damage
            if damage is not None:  # cut a half-written last line before appending
                with self.journal.open("r+b") as fh:
                    fh.truncate(damage.offset)
            with self.journal.open("ab") as fh:
                fh.write(encode_header(self.header))
            self._index = None  # lines written by an earlier run: scan when composing
            return
        start = encode_start(self.header, self.path.name)
        with self.journal.open("wb") as fh:
            fh.write(start)
            fh.flush()
            os.fsync(fh.fileno())
        self._size = len(start)

    def add(self, sample: s.EvalSample) -> None:
        """Queue one finished sample for the journal (never blocks)."""
        self._pending.append((encode_sample(sample), (sample.id, sample.epoch)))
        if len(self._pending) >= FLUSH_BATCH:
            self._wake.set()

    def _append(self, lines: list[tuple[bytes, tuple[Any, int] | None]], sync: bool) -> None:
        with writing(self.journal), self.journal.open("ab") as fh:
            fh.write(b"".join(line for line, _ in lines))
            fh.flush()
            if sync:
                os.fsync(fh.fileno())
        index, offset, skip = self._index, self._size, len(_SAMPLE_PREFIX)
        for line, key in lines:
            if index is not None and key is not None:
                index[key] = (offset + skip, len(line) - skip - 2)
            offset += len(line)
        self._size = offset

    async def _flush(self, sync: bool = False) -> None:
        # Lines leave the queue only once written: a cancelled flush loses nothing.
        lines = self._pending[:]
        if lines or sync:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self._append, lines, sync)
            del self._pending[: len(lines)]
            self.written += len(lines)

    async def run(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """The actor: open the journal, then flush at least once a second until closed."""
        await anyio.to_thread.run_sync(self._open)
        task_status.started()
        while not self._closed:
            with anyio.move_on_after(FLUSH_EVERY):
                await self._wake.wait()
            self._wake = anyio.Event()
            await self._flush()

    def stop(self) -> None:
        """End the actor's loop; what is still queued is written by `close()`."""
        self._closed = True
        self._wake.set()

    async def close(self, header: s.EvalLog | None = None) -> None:
        """Write what is queued (and `header`, if given) and fsync; the journal stays."""
        self.stop()
        with anyio.CancelScope(shield=True):
            if header is not None:
                self._pending.append((encode_header(header), None))
            await self._flush(sync=True)

    def finalize(self, header: s.EvalLog, path: Path | None = None) -> Path:
        """Compose the final log (at `path`, default the writer's) from the journal with
        `header`, update the listing, then remove the journal. Call after `close()`."""
        target = path or self.path
        if target.suffix != self.path.suffix:
            target = target.with_suffix(self.path.suffix)
        self._append([(encode_header(header), None)], sync=True)
        with writing(target):
            compose_final(self.journal, target, header, self.order, self._index)
            update_listing(target.parent, target.name, header)
            self.journal.unlink(missing_ok=True)
        self.finalized = True
        return target
