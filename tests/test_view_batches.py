"""The viewer's `batches.json`: a run's provider batches (batch mode), without their
requests, from a running journal as it records them and from a final log's header, live
and in a bundle; and a run in batch mode against the mock server, followed as it goes."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import httpx
import msgspec

import vitals_engine as ve
from tests.helpers import evaluating, openai, sums, wait_until
from vitals_engine.log import schema as s
from vitals_engine.log.journal_format import (
    encode_batch,
    encode_sample,
    encode_start,
    read_journal_batches,
)
from vitals_engine.log.logged_batches import logged_batches
from vitals_engine.log.writer import write_json_log
from vitals_engine.viewer.api import LogRoute, parse_log_route
from vitals_engine.viewer.bundle import bundle
from vitals_engine.viewer.catalog import Catalog
from vitals_engine.viewer.contents import JournalTail, counter
from vitals_engine.viewer.rows import batch_row
from vitals_engine.viewer.server import ViewServer
from vitals_engine.vocab.batch_records import BatchRecord, BatchRequest

from test_view import (  # isort: skip
    FIXTURES,
    api_path,
    synthetic_header,
    synthetic_sample,
)

JOURNAL = "2026-01-01T00-00-00+00-00_batched_x.journal"
ROW_FIELDS = {
    "key",
    "id",
    "provider",
    "model",
    "requests",
    "created",
    "submitted",
    "ended",
    "status",
    "counts",
    "pending",
}


def created(key: str, requests: int = 2) -> BatchRecord:
    """A batch's first record: its endpoint and its requests, before it is submitted."""
    return BatchRecord(
        key=key,
        provider="OpenAI",
        base_url="http://127.0.0.1:1/v1",
        model="gpt-test",
        requests=requests,
        created=1767225600.0,
        entries=[BatchRequest(f"{key}-{i}", i, 1, "solver", "ab12") for i in range(requests)],
    )


def submitted(key: str) -> BatchRecord:
    return BatchRecord(key=key, id=f"batch_{key}", submitted=1767225601.0)


def ended(key: str, status: str = "completed") -> BatchRecord:
    return BatchRecord(
        key=key, ended=1767225700.0, status=status, counts={"completed": 2, "failed": 0}
    )


def start_journal(path: Path) -> None:
    header = synthetic_header("batched", 2, status="started")
    header.results = None
    header.stats = s.EvalStats(started_at="2026-01-01T00:00:00+00:00")
    path.write_bytes(encode_start(header, path.with_suffix(".json").name))


def append(path: Path, *records: BatchRecord) -> None:
    with path.open("ab") as fh:
        for record in records:
            fh.write(encode_batch(record))


def by_key(document: dict) -> dict[str, dict]:
    return {row["key"]: row for row in document["batches"]}


# -- the journal tail ---------------------------------------------------------------------------


def test_the_tail_merges_batch_records_as_they_are_appended(tmp_path: Path) -> None:
    """Each update merges the batch records appended since the last; a fork's merges leave
    the tail it came from as it was."""
    journal = tmp_path / JOURNAL
    start_journal(journal)
    append(journal, created("vb-1"))
    tail = JournalTail(journal, counter())
    assert tail.update() is True
    (batch,) = tail.batches.values()
    assert (batch.key, batch.requests, batch.id, batch.pending) == ("vb-1", 2, None, False)
    assert not hasattr(batch, "entries")  # its requests are never read

    append(journal, submitted("vb-1"), created("vb-2", 3))
    twin = tail.fork()
    assert twin.update() is True
    assert twin.batches["vb-1"].id == "batch_vb-1"
    assert twin.batches["vb-1"].pending is True
    assert twin.batches["vb-1"].model == "gpt-test"  # earlier records' fields kept
    assert twin.batches["vb-2"].requests == 3
    assert list(tail.batches) == ["vb-1"]  # the fork's reading left the original alone
    assert tail.batches["vb-1"].id is None


def test_a_batch_record_the_tail_cannot_read_is_passed_over(tmp_path: Path) -> None:
    """A batch record of an unexpected shape is left out; the samples after it still come."""
    journal = tmp_path / JOURNAL
    start_journal(journal)
    append(journal, created("vb-1"))
    with journal.open("ab") as fh:
        fh.write(b'{"kind":"batch","batch":{"key":"vb-2","counts":"many"}}\n')
        fh.write(b'{"kind":"batch","batch":null}\n')
        fh.write(encode_sample(synthetic_sample(1)))
    tail = JournalTail(journal, counter())
    tail.update()
    assert list(tail.batches) == ["vb-1"]
    assert [row["id"] for row in tail.rows_since(None)] == [1]
    assert tail.damage is None


def test_the_tails_batches_are_the_journals_but_their_requests(tmp_path: Path) -> None:
    """The tail reads batch records without their requests, merged as
    `read_journal_batches` merges them."""
    journal = tmp_path / JOURNAL
    start_journal(journal)
    append(journal, created("vb-1"), created("vb-2"), submitted("vb-1"), submitted("vb-2"))
    append(journal, ended("vb-2", "expired"), BatchRecord(key="vb-2", counts={"expired": 2}))
    tail = JournalTail(journal, counter())
    tail.update()
    assert all(not hasattr(b, "entries") for b in tail.batches.values())
    assert [batch_row(b) for b in tail.batches.values()] == [
        batch_row(b) for b in read_journal_batches(journal)
    ]


# -- the API -------------------------------------------------------------------------------------


def test_batches_route() -> None:
    assert parse_log_route(["runs", "a.journal", "batches.json"]) == LogRoute(
        "runs/a.journal", "batches"
    )


def test_a_running_journals_batches_are_served_as_they_are_recorded(tmp_path: Path) -> None:
    """`batches.json` lists a journal's batches without their requests, re-read as the run
    records them: not submitted, pending, then ended; each record is announced as a change
    of the journal, and its entry in `logs.json` counts them."""
    journal = tmp_path / JOURNAL
    start_journal(journal)
    append(journal, created("vb-1"), submitted("vb-1"), created("vb-2"))
    with (
        ViewServer(tmp_path).start() as running,
        httpx.Client(base_url=running.url, timeout=10) as http,
    ):
        document = http.get(api_path(journal.name, "batches.json")).json()
        assert (document["file"], document["running"]) == (journal.name, True)
        assert (document["pending"], document["ended"]) == (1, 0)
        rows = by_key(document)
        assert set(rows) == {"vb-1", "vb-2"}
        assert all(set(row) == ROW_FIELDS for row in rows.values())
        assert rows["vb-1"] == {
            "key": "vb-1",
            "id": "batch_vb-1",
            "provider": "OpenAI",
            "model": "gpt-test",
            "requests": 2,
            "created": 1767225600.0,
            "submitted": 1767225601.0,
            "ended": None,
            "status": None,
            "counts": None,
            "pending": True,
        }
        assert (rows["vb-2"]["id"], rows["vb-2"]["pending"]) == (None, False)
        (entry,) = http.get("/api/logs.json").json()["logs"]
        assert (entry["batches"], entry["pending_batches"]) == (2, 1)

        with http.stream("GET", "/api/events") as stream:
            lines = stream.iter_lines()
            messages = (json.loads(line[6:]) for line in lines if line.startswith("data: "))
            assert next(messages)["hello"] is True
            append(journal, submitted("vb-2"), ended("vb-1"))
            assert next(messages)["files"] == [journal.name]
        rows = by_key(http.get(api_path(journal.name, "batches.json")).json())
        assert (rows["vb-1"]["pending"], rows["vb-1"]["status"]) == (False, "completed")
        assert rows["vb-1"]["ended"] == 1767225700.0
        assert rows["vb-1"]["counts"] == {"completed": 2, "failed": 0}
        assert rows["vb-2"]["pending"] is True
        (entry,) = http.get("/api/logs.json").json()["logs"]
        assert (entry["batches"], entry["pending_batches"]) == (2, 1)
        assert http.get(api_path("nope.journal", "batches.json")).status_code == 404


def test_a_log_without_batches_has_none(tmp_path: Path) -> None:
    journal = tmp_path / JOURNAL
    start_journal(journal)
    with journal.open("ab") as fh:
        fh.write(encode_sample(synthetic_sample(1)))
    catalog = Catalog(tmp_path)
    catalog.refresh()
    document = catalog.batches(journal.name)
    assert document is not None
    assert (document["batches"], document["pending"], document["ended"]) == ([], 0, 0)
    (entry,) = catalog.entries()
    assert (entry["batches"], entry["pending_batches"]) == (0, 0)
    assert catalog.batches("nope.json") is None


def _header_with_batches(status: s.Status = "cancelled") -> s.EvalLog:
    """A final log's header naming two batches: one that ended, one left pending (with the
    requests of its unfinished samples, as a stopped run leaves them for a resume)."""
    header = synthetic_header("batched", 2, status=status)
    one = created("vb-1").merged(submitted("vb-1")).merged(ended("vb-1"))
    two = created("vb-2").merged(submitted("vb-2"))
    header.eval.metadata = {"note": "kept", "batches": [one, two]}
    return header


def test_a_final_logs_batches_come_from_its_header(tmp_path: Path) -> None:
    """A `.json` log's batches are those its header names, without their requests; a journal
    that gave way to that log answers with them."""
    header = _header_with_batches()
    journal = tmp_path / JOURNAL
    log = s.EvalLog(
        version=2, status=header.status, eval=header.eval, samples=[synthetic_sample(1)]
    )
    write_json_log(journal.with_suffix(".json"), log)
    assert [b.key for b in logged_batches(ve.read_log(journal.with_suffix(".json")).header)] == [
        "vb-1",
        "vb-2",
    ]
    catalog = Catalog(tmp_path)
    catalog.refresh()
    for file in (journal.with_suffix(".json").name, journal.name):
        document = catalog.batches(file)
        assert document is not None
        assert (document["running"], document["pending"], document["ended"]) == (False, 1, 1)
        rows = by_key(document)
        assert rows["vb-1"]["status"] == "completed"
        assert rows["vb-2"]["pending"] is True
        assert all(set(row) == ROW_FIELDS for row in rows.values())
    (entry,) = catalog.entries()
    assert (entry["batches"], entry["pending_batches"]) == (2, 1)


def _with_header_metadata(source: Path, target: Path, metadata: dict) -> Path:
    """A copy of an `.eval` log whose header has `metadata`."""
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w") as new:
        for item in old.infolist():
            data = old.read(item)
            if item.filename == "header.json":
                header = json.loads(data)
                header["eval"]["metadata"] = metadata
                data = json.dumps(header).encode()
            new.writestr(item, data)
    return target


def test_an_eval_logs_batches_come_from_its_header(tmp_path: Path) -> None:
    batches = msgspec.to_builtins(_header_with_batches().eval.metadata)["batches"]
    log = _with_header_metadata(
        FIXTURES / "inspect" / "retry_original.eval",
        tmp_path / "retry_original.eval",
        {"batches": batches},
    )
    catalog = Catalog(tmp_path)
    catalog.refresh()
    document = catalog.batches(log.name)
    assert document is not None
    assert [row["key"] for row in document["batches"]] == ["vb-1", "vb-2"]
    assert (document["pending"], document["ended"]) == (1, 1)
    assert "entries" not in json.dumps(document)


def test_a_bundle_has_each_logs_batches(tmp_path: Path) -> None:
    """A bundle writes `batches.json` for each log (a journal's as recorded when bundled)."""
    logs = tmp_path / "logs"
    logs.mkdir()
    journal = logs / JOURNAL
    start_journal(journal)
    append(journal, created("vb-1"), submitted("vb-1"))
    header = _header_with_batches("success")
    final = logs / "2026-01-02T00-00-00+00-00_batched_y.json"
    write_json_log(final, s.EvalLog(version=2, status="success", eval=header.eval, samples=[]))
    out = bundle(logs, tmp_path / "site")
    for file, pending in ((journal.name, 1), (final.name, 1)):
        document = json.loads((out / "api" / "logs" / file / "batches.json").read_text())
        assert document["pending"] == pending
        assert "entries" not in json.dumps(document)
    listed = json.loads((out / "api" / "logs.json").read_text())["logs"]
    assert sorted(e["batches"] for e in listed) == [1, 2]


# -- a run in batch mode ---------------------------------------------------------------------------


def batched_task(server, logs: Path, n: int) -> ve.Task:
    chat = openai(server)
    return ve.Task(
        sums(n), solver=ve.generate(chat), scorer=ve.detect_includes(), dir=logs, name="batched"
    )


def test_a_run_in_batch_mode_shows_its_batch_pending_then_ended(server, tmp_path: Path) -> None:
    """While a run waits on its batch, the viewer lists it pending (from the journal); once
    the batch ends and the run is done, the final log lists it ended."""
    server.batch_delay = 3600  # out until the test ends it
    logs = tmp_path / "logs"
    logs.mkdir()
    task = batched_task(server, logs, 3)
    with (
        ViewServer(logs).start() as viewer,
        httpx.Client(base_url=viewer.url, timeout=10) as http,
    ):

        def pending() -> list[dict]:
            entries = http.get("/api/logs.json").json()["logs"]
            if not entries:
                return []
            document = http.get(api_path(entries[0]["file"], "batches.json")).json()
            return [row for row in document["batches"] if row["pending"]]

        with evaluating(task, batch=ve.Batch(size=10, wait=0.05, poll=0.02), progress=False):
            wait_until(lambda: pending(), "the batch listed pending")
            (entry,) = http.get("/api/logs.json").json()["logs"]
            assert entry["file"].endswith(".journal")
            assert (entry["running"], entry["batches"], entry["pending_batches"]) == (True, 1, 1)
            (batch,) = pending()
            assert batch["id"] in server.batches
            assert (batch["provider"], batch["model"], batch["requests"]) == (
                "OpenAI",
                "gpt-test",
                3,
            )
            server.end_batches()
        (entry,) = http.get("/api/logs.json").json()["logs"]
        assert entry["file"] == task.log_path.name
        document = http.get(api_path(entry["file"], "batches.json")).json()
        assert (document["running"], document["pending"], document["ended"]) == (False, 0, 1)
        (batch,) = document["batches"]
        assert batch["pending"] is False
        assert batch["status"] == "completed"
