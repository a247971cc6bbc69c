"""Resuming from object storage (issue #48): the store is the truth. A resume takes what the
store says of a run (a final log there wins over a copy on this machine), a resume refused
leaves nothing a later one could take for the run, and a damaged segment costs the samples
on it, not those after it.

"Machines" are staging directories: all they share is the bucket (moto's S3 server,
`tests/object_store.py`). A run that died mid-way is made from a finished one: its journal
as a killed run leaves it (`helpers.killed_journal`), shipped in segments, its final log
taken out of the bucket.
"""

from __future__ import annotations

import logging
from pathlib import Path

import anyio
import pytest

import vitals_engine as ve
from tests.helpers import killed_journal, openai, sums
from tests.object_store import Bucket
from vitals_engine.storage import Store
from vitals_engine.storage.remote_lock import RemoteLock
from vitals_engine.storage.segments import rebuild
from vitals_engine.storage.shipper import Shipper
from vitals_engine.storage.staging import staging_dir

TASK = "qa"
N = 12


def _task(chat: ve.Chat, url: str) -> ve.Task:
    return ve.Task(sums(N), ve.generate(chat), ve.detect_includes(), name=TASK, dir=url)


def _on(machine: str, s3: Bucket, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Be `machine` from now on: its own staging directory (returned: where runs logging to
    the bucket write their journals there)."""
    monkeypatch.setenv("VITALS_STAGING_DIR", str(tmp_path / machine))
    return staging_dir(s3.url)


def _died(s3: Bucket, server, keep: int, pieces: int = 1) -> str:
    """A run of `N` samples that died after shipping `keep` of them, in `pieces` segments
    of as many samples each: the name of its journal in the bucket (no lock, no final log)."""
    task = _task(openai(server), s3.url)
    task.eval(progress=False)
    journal = anyio.run(killed_journal, task, keep)
    for key in s3.listed("qa/"):
        s3.client.delete_object(Bucket=s3.name, Key=key)
    lines = journal.read_bytes().splitlines(keepends=True)
    shipper = Shipper(Store(s3.url), journal, interval=1.0)
    per = keep // pieces
    for piece in range(1, pieces + 1):
        upto = sum(len(line) for line in lines[: 1 + (keep if piece == pieces else piece * per)])
        shipper.ship(upto)
    journal.unlink()
    server.reset()
    return journal.name


def _log_key(s3: Bucket) -> str:
    (key,) = [k for k in s3.listed("qa/") if k.endswith(".json") and "listing" not in k]
    return key


def test_a_finished_run_in_the_store_is_not_resumed_from_a_refused_copy(
    s3, server, tmp_path, monkeypatch
):
    """A resume refused because another machine continues the run leaves no copy of its
    journal here; once that machine has finished, `resume=True` here says there is nothing
    to resume: it buys no reply again and leaves the finished log in the bucket as it is."""
    _on("first", s3, tmp_path, monkeypatch)
    journal = _died(s3, server, keep=4)
    other = RemoteLock(Store(s3.url), journal, stale_after=60)
    other._me.host = "gpu-node-7"
    other.acquire()

    here = _on("here", s3, tmp_path, monkeypatch)
    with pytest.raises(ve.JournalInUseError, match="gpu-node-7"):
        _task(openai(server), s3.url).eval(resume=True, progress=False)
    assert not list(here.glob("*.journal"))
    other.release()

    _on("gpu-node-7", s3, tmp_path, monkeypatch)
    _task(openai(server), s3.url).eval(resume=True, progress=False)
    finished = s3.read(_log_key(s3))
    bought = len(server.log)
    assert bought == N - 4

    _on("here", s3, tmp_path, monkeypatch)
    with pytest.raises(ve.ConfigError, match="finished"):
        _task(openai(server), s3.url).eval(resume=True, progress=False)
    assert len(server.log) == bought
    assert s3.read(_log_key(s3)) == finished


def test_a_final_log_in_the_store_wins_over_a_journal_left_here(s3, server, tmp_path, monkeypatch):
    """A journal this machine kept of a run (from a resume that stopped before cleaning up,
    or an older version) is not resumed once the store holds the run's final log: the
    store says the run finished, so `resume=True` buys nothing and replaces nothing."""
    _on("first", s3, tmp_path, monkeypatch)
    journal = _died(s3, server, keep=4)
    here = _on("here", s3, tmp_path, monkeypatch)
    rebuild(Store(s3.url), journal, here / journal)  # what an interrupted resume left here

    _on("elsewhere", s3, tmp_path, monkeypatch)
    _task(openai(server), s3.url).eval(resume=True, progress=False)
    finished = s3.read(_log_key(s3))
    bought = len(server.log)

    _on("here", s3, tmp_path, monkeypatch)
    with pytest.raises(ve.ConfigError, match="finished"):
        _task(openai(server), s3.url).eval(resume=True, progress=False)
    assert len(server.log) == bought
    assert s3.read(_log_key(s3)) == finished
    assert not list(here.glob("*.journal"))


def _samples_in(data: bytes) -> set[int]:
    import json

    ids = set()
    for line in data.split(b"\n"):
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("kind") == "sample":
            ids.add(record["sample"]["id"])
    return ids


def test_a_truncated_segment_costs_only_its_own_samples(s3, server, tmp_path, monkeypatch, caplog):
    """A segment cut short in the store (the middle one of three) does not stop a resume
    there: the samples in the segments after it are kept, only those whose lines were lost
    are asked again; a warning names the segment and the bytes lost; once the final log is
    in place nothing is left under `.vitals/`."""
    caplog.set_level(logging.WARNING, logger="vitals_engine")
    _on("first", s3, tmp_path, monkeypatch)
    journal = _died(s3, server, keep=9, pieces=3)
    keys = [k for k in s3.listed(f"qa/.vitals/{journal}/") if k.endswith(".seg")]
    assert len(keys) == 3
    middle = s3.read(keys[1])
    s3.client.put_object(Bucket=s3.name, Key=keys[1], Body=middle[: len(middle) // 2])
    kept = set().union(*(_samples_in(s3.read(key)) for key in keys))
    assert len(kept) < 9
    assert {7, 8, 9} <= kept

    _on("second", s3, tmp_path, monkeypatch)
    _task(openai(server), s3.url).eval(resume=True, progress=False)

    assert len(server.log) == N - len(kept)
    logged = ve.read_log(f"s3://{s3.name}/{_log_key(s3)}")
    assert logged.status == "success"
    assert sorted(sample.id for sample in logged.samples) == list(range(1, N + 1))
    assert not s3.listed("qa/.vitals/")
    segment = keys[1].split("/", 1)[1]
    (said,) = [r.getMessage() for r in caplog.records if segment in r.getMessage()]
    assert "lost" in said
