"""The viewer's catalog reads no file with its lock held: one slow log (a huge one, a
slow disk) does not hold up requests about the others.

A log's header read is made to block on an event; while it blocks, the catalog's
other operations must complete. Events only: a hang would be caught by the joins'
timeouts, and nothing here depends on timing.
"""

from __future__ import annotations

import importlib
import threading
from pathlib import Path

from tests.test_view import synthetic_header, synthetic_sample, write_synthetic_log
from vitals_engine.log.journal_format import encode_sample, encode_start
from vitals_engine.viewer.catalog import Catalog

#: Where the catalog reads a local log's header (its `LocalSource`).
catalog_module = importlib.import_module("vitals_engine.viewer.sources")
contents_module = importlib.import_module("vitals_engine.viewer.contents")

HANG_GUARD = 30.0  # seconds: only ever reached if the catalog hangs


class Gate:
    """Blocks the first read of one file until `release()`; says when the read began."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.released = threading.Event()
        self._first = True
        self._lock = threading.Lock()

    def block_once(self) -> None:
        with self._lock:
            first, self._first = self._first, False
        if first:
            self.entered.set()
            assert self.released.wait(HANG_GUARD), "the test never released the read"

    def release(self) -> None:
        self.released.set()


def _refresh_in_thread(catalog: Catalog) -> tuple[threading.Thread, list]:
    outcome: list = []

    def run() -> None:
        try:
            outcome.append(catalog.refresh())
        except BaseException as exc:  # surfaced by the test
            outcome.append(exc)

    thread = threading.Thread(target=run, name="slow refresh", daemon=True)
    thread.start()
    return thread, outcome


def _other_requests(catalog: Catalog, known: str) -> None:
    """What the viewer's requests about `known` call: all must complete now."""
    assert [e["file"] for e in catalog.entries()] == [known]
    assert catalog.errors() == []
    assert list(catalog.headers()) == [known]
    assert catalog.path(known) is not None
    document = catalog.summaries(known)
    assert document is not None
    assert len(document["rows"]) == 3
    row = document["rows"][0]
    assert catalog.sample(known, row["id"], row["epoch"]) is not None


def test_a_slow_header_read_does_not_hold_up_the_other_logs(tmp_path: Path, monkeypatch):
    root = tmp_path / "logs"
    root.mkdir()
    known = write_synthetic_log(root, 3, task="known").name
    catalog = Catalog(root)
    assert catalog.refresh() == {known}

    slow = write_synthetic_log(root / "sub", 2, task="slow")
    gate = Gate()
    read_log = catalog_module.read_log

    def gated_read_log(path, *args, **kwargs):
        if Path(path) == slow:
            gate.block_once()
        return read_log(path, *args, **kwargs)

    monkeypatch.setattr(catalog_module, "read_log", gated_read_log)
    thread, outcome = _refresh_in_thread(catalog)
    try:
        assert gate.entered.wait(HANG_GUARD), "the refresh never began reading the slow log"
        _other_requests(catalog, known)  # would wait for the lock before the fix
    finally:
        gate.release()
        thread.join(HANG_GUARD)
    assert not thread.is_alive()
    assert outcome == [{"sub/" + slow.name}]
    assert sorted(e["file"] for e in catalog.entries()) == sorted([known, "sub/" + slow.name])


def test_a_slow_journal_read_does_not_hold_up_the_other_logs(tmp_path: Path, monkeypatch):
    """The same for a running eval's journal, followed incrementally."""
    root = tmp_path / "logs"
    root.mkdir()
    known = write_synthetic_log(root, 3, task="known").name
    journal = root / "run.journal"
    journal.write_bytes(
        encode_start(synthetic_header("run", 2, status="started"), "run.json")
        + encode_sample(synthetic_sample(1))
    )
    catalog = Catalog(root)
    assert catalog.refresh() == {known, "run.journal"}
    assert len(catalog.summaries("run.journal")["rows"]) == 1  # type: ignore[index]

    with journal.open("ab") as fh:  # the run goes on: one more sample
        fh.write(encode_sample(synthetic_sample(2)))
    gate = Gate()
    update = contents_module.JournalTail.update

    def gated_update(self):
        if self.path == journal:
            gate.block_once()
        return update(self)

    monkeypatch.setattr(contents_module.JournalTail, "update", gated_update)
    thread, outcome = _refresh_in_thread(catalog)
    try:
        assert gate.entered.wait(HANG_GUARD), "the refresh never began reading the journal"
        # The other log is served, and the listing shows the journal as last read (a
        # request about the journal itself waits for its read: it needs it).
        document = catalog.summaries(known)
        assert document is not None
        assert len(document["rows"]) == 3
        assert catalog.sample(known, 1, 1) is not None
        samples = {e["file"]: e["samples"] for e in catalog.entries()}
        assert samples == {known: 3, "run.journal": 1}
    finally:
        gate.release()
        thread.join(HANG_GUARD)
    assert not thread.is_alive()
    assert outcome == [{"run.journal"}]
    rows = catalog.summaries("run.journal")["rows"]  # type: ignore[index]
    assert [row["id"] for row in rows] == [1, 2]


def test_a_read_overtaken_by_a_newer_one_is_not_published(tmp_path: Path, monkeypatch):
    """A refresh that read a log while another refresh read (and published) a newer
    state of it leaves the newer one in place."""
    root = tmp_path / "logs"
    root.mkdir()
    slow = write_synthetic_log(root, 2, task="older")
    catalog = Catalog(root)
    catalog.refresh()
    rel = slow.name

    staging = tmp_path / "staging"  # outside the log directory
    write_synthetic_log(staging, 3, task="older").replace(slow)  # changed: 3 samples
    gate = Gate()
    read_log = catalog_module.read_log

    def gated_read_log(path, *args, **kwargs):
        result = read_log(path, *args, **kwargs)
        if Path(path) == slow:
            gate.block_once()  # the first refresh has read the 3-sample state, then stalls
        return result

    monkeypatch.setattr(catalog_module, "read_log", gated_read_log)
    thread, outcome = _refresh_in_thread(catalog)
    try:
        assert gate.entered.wait(HANG_GUARD)
        newer = write_synthetic_log(staging, 5, task="older")
        newer.replace(slow)  # changed again while the first read stalls: 5 samples
        assert catalog.refresh() == {rel}  # reads the newest state itself, not waiting
        assert [e["samples"] for e in catalog.entries()] == [5]
    finally:
        gate.release()
        thread.join(HANG_GUARD)
    assert not thread.is_alive()
    assert outcome == [set()]  # its read was overtaken: dropped
    assert [e["samples"] for e in catalog.entries()] == [5]


def test_refresh_waits_for_a_read_another_refresh_has_under_way(tmp_path: Path, monkeypatch):
    """A refresh that finds the same read under way waits for it rather than reading twice."""
    root = tmp_path / "logs"
    root.mkdir()
    catalog = Catalog(root)
    catalog.refresh()
    slow = write_synthetic_log(root, 2, task="slow")
    gate = Gate()
    calls: list[Path] = []
    read_log = catalog_module.read_log

    def gated_read_log(path, *args, **kwargs):
        calls.append(Path(path))
        gate.block_once()
        return read_log(path, *args, **kwargs)

    monkeypatch.setattr(catalog_module, "read_log", gated_read_log)
    first, first_outcome = _refresh_in_thread(catalog)
    try:
        assert gate.entered.wait(HANG_GUARD)
        second, second_outcome = _refresh_in_thread(catalog)
        assert catalog.entries() == []  # not published yet, and not blocked
    finally:
        gate.release()
        first.join(HANG_GUARD)
    second.join(HANG_GUARD)
    assert not first.is_alive()
    assert not second.is_alive()
    assert calls == [slow]
    assert first_outcome == [{slow.name}]
    assert second_outcome == [set()]
    assert [e["file"] for e in catalog.entries()] == [slow.name]
