"""The pieces of logs in object storage (issue #34), on fsspec's in-memory store: URLs
told from paths, segments shipped and rebuilt, the lock object, the backend's errors as
ours. The runs against a real S3 API are in tests/test_object_store.py."""

from __future__ import annotations

import builtins
import os
import sys
import time
import uuid
from pathlib import Path

import pytest

import vitals_engine as ve
from tests.helpers import sums, wait_until
from vitals_engine.storage import Store, as_store, is_url
from vitals_engine.storage.failures import store_error
from vitals_engine.storage.remote_lock import RemoteLock
from vitals_engine.storage.segments import catch_up, journals, rebuild, segments
from vitals_engine.storage.shipper import Shipper
from vitals_engine.storage.staging import staging_dir

pytest.importorskip("fsspec")


@pytest.fixture
def store(tmp_path, monkeypatch) -> Store:
    monkeypatch.setenv("VITALS_STAGING_DIR", str(tmp_path / "staging"))
    monkeypatch.setenv("VITALS_SHIP_INTERVAL", "0.05")
    return Store(f"memory://unit-{uuid.uuid4().hex[:10]}/logs")


def test_urls_and_paths_are_told_apart():
    """An fsspec URL is a store; a path, a PathLike and file:// are local."""
    assert is_url("s3://b/p")
    assert is_url("gs://b")
    assert is_url("memory://x")
    assert not is_url("logs")
    assert not is_url(Path("s3:/b"))
    assert not is_url("file:///tmp/x")
    assert as_store("logs") is None
    assert as_store("s3://b/p/") == Store("s3://b/p")


def test_staging_directories_are_keyed_by_the_url(tmp_path, monkeypatch):
    """Two URLs stage apart; the same URL (with or without a trailing slash) in one place."""
    monkeypatch.setenv("VITALS_STAGING_DIR", str(tmp_path))
    one, two = staging_dir("s3://b/qa"), staging_dir("s3://b/qa2")
    assert one != two
    assert one == staging_dir("s3://b/qa/")
    assert one.parent == tmp_path


def test_a_url_without_fsspec_says_what_to_install(monkeypatch):
    """Without fsspec, a URL is a `ConfigError` naming the extra to install."""
    real_import = builtins.__import__

    def no_fsspec(name, *args, **kwargs):
        if name == "fsspec":
            raise ImportError("No module named 'fsspec'")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "fsspec", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_fsspec)
    with pytest.raises(ve.ConfigError, match=r'pip install "vitals-engine\[s3\]"'):
        _ = Store("s3://team-evals/qa").fs


def test_backend_errors_become_ours():
    """Denied, missing, throttled and unreachable stores are told apart, with advice."""
    url = "s3://b/p"
    assert isinstance(
        store_error(PermissionError("Access Denied"), url, "writing"), ve.StoreAccessDenied
    )
    assert isinstance(store_error(FileNotFoundError("no bucket"), url, "reading"), ve.StoreNotFound)
    slow = store_error(OSError("SlowDown: Please reduce your request rate"), url, "writing")
    assert isinstance(slow, ve.StoreThrottled)
    assert "503 SlowDown" in str(slow)
    down = store_error(ConnectionRefusedError("Connection refused"), url, "listing")
    assert isinstance(down, ve.StoreUnreachable)
    assert "cannot list" in str(down)
    assert all(issubclass(e, ve.StoreError) for e in (ve.StoreNotFound, ve.StoreThrottled))


def test_segments_hold_whole_lines_and_rebuild_the_journal(store, tmp_path):
    """Each shipment puts the whole lines written since the last as one new segment (a
    half-written last line waits); the segments rebuild the journal's whole lines, and a
    follower appends only the segments it lacks."""
    journal = tmp_path / "run.journal"
    journal.write_bytes(b'{"a":1}\n{"b":2}\n{"c"')
    shipper = Shipper(store, journal, interval=0.05)
    assert shipper.ship(journal.stat().st_size) == 16
    with journal.open("ab") as fh:
        fh.write(b':3}\n{"d":4}\n')
    follower = tmp_path / "follow" / "run.journal"
    catch_up(store, "run.journal", follower)
    assert shipper.ship(journal.stat().st_size) == 16
    assert [seg.offset for seg in segments(store, "run.journal")] == [0, 16]
    assert journals(store) == ["run.journal"]
    rebuilt = tmp_path / "elsewhere" / "run.journal"
    assert rebuild(store, "run.journal", rebuilt) == 32
    assert rebuilt.read_bytes() == journal.read_bytes()
    assert catch_up(store, "run.journal", follower) == 32
    assert follower.read_bytes() == journal.read_bytes()


def test_the_lock_is_held_by_one_and_taken_over_when_stale(store):
    """A fresh lock refuses a second run, naming the holder; once the lease the holder
    wrote in it has passed without a heartbeat, it is taken over (whatever lease the
    taker would give); the run that lost it is told at its next heartbeat, naming the
    run that took it."""
    first = RemoteLock(store, "run.journal", stale_after=60)
    first._me.host = "machine-a"
    first.acquire()
    second = RemoteLock(store, "run.journal", stale_after=60)
    second._me.host = "machine-b"
    with pytest.raises(ve.JournalInUseError, match="machine-a"):
        second.acquire()
    first._me.lease = 0.05
    first.beat()
    wait_until(lambda: time.time() > first._me.beat + 0.05, "the lease to pass")
    second.acquire()
    with pytest.raises(ve.JournalInUseError, match=r"taken over.*machine-b"):
        first.beat()
    second.beat()
    second.release()
    assert store.info(".vitals/run.journal.lock") is None


def test_a_dead_process_on_this_host_leaves_a_lock_taken_at_once(store):
    """A lock whose process on this host is gone is stale at once, however fresh."""
    dead = RemoteLock(store, "run.journal", stale_after=3600)
    dead._me.pid = _a_dead_pid()
    dead.acquire()
    RemoteLock(store, "run.journal", stale_after=3600).acquire()


def _a_dead_pid() -> int:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


def test_a_run_logs_to_memory_and_resumes_from_its_log(store, tmp_path, monkeypatch):
    """A run on memory:// puts its log there; a failed run is resumed from it (pulled
    into a fresh staging directory) and its log replaced in the store."""

    def broken(sample: ve.Sample) -> str:
        raise RuntimeError("not today")

    task = ve.Task(sums(3), broken, ve.detect_includes(), name="mem", dir=store.url)
    with pytest.raises(ve.EvalFailedError):
        task.eval(progress=False)
    (name,) = [o.name for o in store.list() if o.name.endswith(".json") and "listing" not in o.name]
    monkeypatch.setenv("VITALS_STAGING_DIR", str(tmp_path / "another-machine"))
    again = ve.Task(sums(3), ve.generate(ve.chat_mock()), ve.detect_includes(), name="mem")
    again.dir = store.url
    again.eval(resume=True, resume_anyway=True, progress=False)
    assert ve.read_log(store.url_of(name)).status == "success"
    assert not store.list(".vitals", recursive=True)


def test_vitals_log_dir_may_be_a_url(store, monkeypatch):
    """`VITALS_LOG_DIR` set to a URL sends a task's logs there; `task.dir` says the URL."""
    monkeypatch.setenv("VITALS_LOG_DIR", store.url)
    task = ve.Task(sums(2), ve.generate(ve.chat_mock()), ve.detect_includes(), name="env")
    assert task.dir == store.url
    task.eval(progress=False)
    assert any(o.name.endswith(".json") and "listing" not in o.name for o in store.list())


def test_an_eval_set_in_a_store_keeps_what_finished_on_resume(store, tmp_path, monkeypatch):
    """An eval set whose tasks log to a store leaves each run's log there; resumed from
    another machine, it finds them there and runs nothing again."""
    tasks = [
        ve.Task(sums(2), ve.generate(ve.chat_mock()), ve.detect_includes(), name=name)
        for name in ("first", "second")
    ]
    for task in tasks:
        task.dir = store.url
    ve.eval_set(tasks)
    logs = sorted(o.name for o in store.list() if o.name.endswith(".json"))
    assert len(logs) == 3  # two logs and the listing
    monkeypatch.setenv("VITALS_STAGING_DIR", str(tmp_path / "another-machine"))
    for task in tasks:
        task.dir = store.url
    ve.eval_set(tasks, resume=True)
    assert sorted(o.name for o in store.list() if o.name.endswith(".json")) == logs


def test_a_bundle_of_a_store(store, tmp_path):
    """`ve.bundle(url)` writes the viewer and the store's logs as a static site."""
    task = ve.Task(sums(2), ve.generate(ve.chat_mock()), ve.detect_includes(), name="site")
    task.dir = store.url
    task.eval(progress=False)
    site = ve.bundle(store.url, tmp_path / "site")
    listed = (site / "api" / "logs.json").read_text()
    assert task.log_path is not None
    assert task.log_path.name in listed
    assert (site / "index.html").is_file()


def test_a_damaged_segment_costs_its_own_lines_only(store, tmp_path, caplog):
    """A segment cut short in the store: the journal rebuilt from it keeps every byte's
    offset (the lost bytes blanked), reads the segments after it, says which segment and
    bytes were lost, and a follower appends past it; shipping goes on where the last ends."""
    journal = tmp_path / "run.journal"
    lines = [b'{"a":1}\n', b'{"b":2}\n', b'{"c":3}\n', b'{"d":4}\n']
    shipper = Shipper(store, journal, interval=0.05)
    for upto in range(1, 5):  # a segment per line
        journal.write_bytes(b"".join(lines[:upto]))
        shipper.ship(journal.stat().st_size)
    middle = segments(store, "run.journal")[1].object.name
    store.put(middle, b'{"b"')  # cut short: four of its eight bytes

    rebuilt = tmp_path / "elsewhere" / "run.journal"
    with caplog.at_level("WARNING", logger="vitals_engine"):
        assert rebuild(store, "run.journal", rebuilt) == 32
    data = rebuilt.read_bytes()
    assert data[:8] == lines[0]
    assert data[16:] == lines[2] + lines[3]
    assert not data[8:16].strip()  # blanked: a reader passes over
    assert data[15:16] == b"\n"
    (said,) = [r.getMessage() for r in caplog.records if middle in r.getMessage()]
    assert "bytes 8-16" in said
    follower = tmp_path / "follow" / "run.journal"
    follower.parent.mkdir()
    follower.write_bytes(lines[0])
    assert catch_up(store, "run.journal", follower) == 32
    assert follower.read_bytes() == data
