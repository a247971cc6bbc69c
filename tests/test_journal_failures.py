"""A journal that cannot be written, or a run that finds its journal taken: nothing
finished is lost, no log is left half-composed, and the error says what to do."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

import vitals_engine as ve
from tests.helpers import sums, until
from tests.inspect_check import read_eval_log
from tests.journals import started_journal
from vitals_engine.log import writer as writer_module
from vitals_engine.log.journal_format import read_journal
from vitals_engine.log.journal_lock import JournalLock
from vitals_engine.log.live import live_path

pytestmark = pytest.mark.anyio


def files(directory: Path, pattern: str) -> list[Path]:
    return sorted(directory.glob(pattern))


def journaled(directory: Path, at_least: int) -> Path | None:
    """The directory's journal once it holds `at_least` samples (not read before its
    start record is whole: see `started_journal`)."""
    journal = started_journal(directory)
    if journal is not None and len(read_journal(journal).samples) >= at_least:
        return journal
    return None


def held_at(last: int, gate: anyio.Event) -> Any:
    """A solver answering with the mock model that holds sample `last` until `gate` is set."""
    chat = ve.chat_mock()

    async def solver(input: str, sample: ve.Sample) -> str:
        if sample.id == last:
            await gate.wait()
        return await chat.clone().chat_async(input)

    return solver


class Answer:
    """A solver that answers with the mock model and notes each input it was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def __call__(self, input: str) -> str:
        self.asked.append(input)
        return await ve.chat_mock().chat_async(input)


def make_task(
    directory: Path, log_format: str = "json", n: int = 20, solver: Answer | None = None
) -> ve.Task:
    return ve.Task(
        sums(n),
        solver=solver or Answer(),
        scorer=ve.detect_includes(),
        dir=directory,
        name="disk",
        log_format=log_format,
    )


#: How a journal's reply record starts: each model reply is one write of its own.
REPLY = b'{"kind":"reply"'


class FailingDisk:
    """`write_fully` that, on its `nth` call (model replies, a write each, not counted),
    writes half the bytes and then fails as a full disk does; the calls after it succeed
    (space was freed)."""

    def __init__(self, nth: int) -> None:
        self.nth = nth
        self.calls = 0
        self.real = writer_module.write_fully

    def __call__(self, fd: int, data: bytes) -> None:
        if data.startswith(REPLY):
            self.real(fd, data)
            return
        self.calls += 1
        if self.calls == self.nth:
            os.write(fd, data[: len(data) // 2])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.real(fd, data)


@pytest.mark.parametrize("log_format", ["json", "eval"])
async def test_a_failed_append_stops_the_run_and_keeps_a_whole_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, log_format: str
) -> None:
    """A partial append then ENOSPC: the run stops with a LogWriteError naming the
    journal; the journal is cut back to its last whole record (no damaged line), the
    samples that could not be written are written when the run closes, and the final
    log reads back whole with every finished sample."""
    disk = FailingDisk(nth=8)
    monkeypatch.setattr(writer_module, "write_fully", disk)
    task = make_task(tmp_path, log_format)
    with pytest.raises(ve.LogWriteError, match="No space left on device") as caught:
        await task.eval_async(max_concurrency=1)
    assert caught.value.path.endswith(".journal")
    assert not files(tmp_path, "*.journal")
    logged = ve.read_log(task.log_path)
    assert logged.status == "error"
    assert "No space left on device" in (logged.header.error.message if logged.header.error else "")
    ids = [s.id for s in logged.samples]
    assert len(ids) == len(set(ids))
    finished = [s.id for s in logged.samples if s.error is None and s.scores]
    assert finished[:7] == [1, 2, 3, 4, 5, 6, 7]  # the 7th is the one whose append failed
    if log_format == "json":
        assert read_eval_log(str(task.log_path)).status == "error"


async def test_a_disk_still_full_at_the_end_keeps_the_journal_to_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the disk stays full, no final log is written and the journal stays, whole:
    resume finishes the run without asking the model again for what was journaled."""
    calls = {"n": 0}
    real = writer_module.write_fully

    def full_after_five(fd: int, data: bytes) -> None:  # model replies not counted
        calls["n"] += not data.startswith(REPLY)
        if calls["n"] > 5:
            os.write(fd, data[:7])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(fd, data)

    monkeypatch.setattr(writer_module, "write_fully", full_after_five)
    task = make_task(tmp_path)
    with pytest.raises(ve.LogWriteError, match="cannot write the log"):
        await task.eval_async(max_concurrency=1)
    (journal,) = files(tmp_path, "*.journal")
    contents = read_journal(journal)
    assert contents.damage is None
    assert not contents.skipped
    kept = {s.id for s in contents.samples}
    assert len(kept) == 4  # the start record, then four samples
    assert not files(tmp_path, "*.json")

    monkeypatch.setattr(writer_module, "write_fully", real)
    answer = Answer()
    again = make_task(tmp_path, solver=answer)
    await again.eval_async(resume=True)
    final = ve.read_log(again.log_path)
    assert final.status == "success"
    assert sorted(s.id for s in final.samples) == list(range(1, 21))
    assert len(answer.asked) == 20 - len(kept)


async def test_a_failed_fsync_cuts_back_to_the_last_synced_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fsync fails (EIO): what it covered may not be on the disk, so the journal is cut
    back to the last synced record and those samples are written again on close."""
    failed = {"done": False}
    real = writer_module.sync_file

    def fsync_fails_once(fd: int) -> None:
        # once the journal holds its start record and samples 1 to 19, some not synced
        journal = next(tmp_path.glob("*.journal"))
        if not failed["done"] and journal.read_bytes().count(b'{"kind":"sample"') >= 19:
            failed["done"] = True
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real(fd)

    monkeypatch.setattr(writer_module, "sync_file", fsync_fails_once)
    monkeypatch.setattr(writer_module, "SYNC_EVERY", 0.0)
    solver = held_at(20, anyio.Event())  # never set
    task = ve.Task(sums(20), solver=solver, scorer=ve.detect_includes(), dir=tmp_path)
    with pytest.raises(ve.LogWriteError, match="fsync failed"):
        await task.eval_async()  # sample 20 waits until the failure stops the run
    assert failed["done"]
    logged = ve.read_log(task.log_path)
    assert sorted(s.id for s in logged.samples if s.error is None) == list(range(1, 20))


@pytest.mark.no_inspect_check
@pytest.mark.parametrize("suffix", [".json", ".eval"])
def test_a_journal_that_does_not_match_its_index_composes_no_log(
    tmp_path: Path, suffix: str
) -> None:
    """Stale offsets (what a torn append used to leave) never compose an unreadable log:
    finalize raises LogWriteError, writes no final log and keeps the journal."""
    done = make_task(tmp_path / "src")
    done.eval()
    logged = ve.read_log(done.log_path)
    header = msgspec.structs.replace(logged.header, samples=msgspec.UNSET)
    target = tmp_path / f"out{suffix}"
    log_writer = writer_module.LogWriter(target, header)
    log_writer._open()
    for sample in logged.samples:
        log_writer.add(sample)
    assert log_writer._index is not None
    shift = 3 << 32  # each sample's offset 3 bytes on (see writer._span)
    log_writer._index = {key: span + shift for key, span in log_writer._index.items()}
    with pytest.raises(ve.LogWriteError, match="does not read back"):
        log_writer.finalize(header)
    assert not target.exists()
    assert log_writer.journal.exists()
    assert not list(tmp_path.glob(".tmp-*"))


def test_a_final_log_that_does_not_read_back_keeps_the_journal(tmp_path: Path) -> None:
    """finalize's read-back check refuses the new file: nothing replaced, journal kept."""
    done = make_task(tmp_path / "src")
    done.eval()
    logged = ve.read_log(done.log_path)
    header = msgspec.structs.replace(logged.header, samples=msgspec.UNSET)
    target = tmp_path / "out.json"
    target.write_text("the previous log")
    log_writer = writer_module.LogWriter(target, header)
    log_writer._open()
    for sample in logged.samples:
        log_writer.add(sample)

    def refuse(path: Path) -> None:
        raise ve.LogWriteError(f"{path} is wrong", path=str(path))

    with pytest.raises(ve.LogWriteError, match="is wrong"):
        log_writer.finalize(header, check=refuse)
    assert target.read_text() == "the previous log"
    assert log_writer.journal.exists()


async def test_a_journal_another_run_writes_cannot_be_resumed(tmp_path: Path) -> None:
    """Resuming the journal of a run still going (here, in this very process) is refused
    with JournalInUseError naming the process; the running run is untouched (its live
    sidecar too) and ends with every sample."""
    gate = anyio.Event()
    solver = held_at(5, gate)
    running = ve.Task(sums(5), solver=solver, scorer=ve.detect_includes(), dir=tmp_path)
    other = ve.Task(sums(5), solver=solver, scorer=ve.detect_includes(), dir=tmp_path)
    async with anyio.create_task_group() as tg:
        tg.start_soon(running.eval_async)
        journal = await until(lambda: journaled(tmp_path, at_least=4))
        sidecar = live_path(journal)
        sidecar.write_text("{}")  # as the running run writes it when text streams
        with pytest.raises(ve.JournalInUseError, match=f"process {os.getpid()} ") as caught:
            await other.eval_async(resume=True)
        assert caught.value.path == str(journal)
        assert isinstance(caught.value, ve.ConfigError)
        assert sidecar.exists()
        gate.set()
    assert sorted(s.id for s in ve.read_log(running.log_path).samples) == [1, 2, 3, 4, 5]


def test_a_lock_left_by_a_dead_run_does_not_hold(tmp_path: Path) -> None:
    """The lock is the OS's, not the file's: a lock file nobody holds is taken over."""
    journal = tmp_path / "run.journal"
    stale = JournalLock(journal)
    stale.path.write_text('{"pid": 999999}')
    stale.acquire()
    assert stale.held
    other = JournalLock(journal)
    with pytest.raises(ve.JournalInUseError, match=f"process {os.getpid()} "):
        other.acquire()
    stale.release()
    other.acquire()
    other.release()
    assert not stale.path.exists()
