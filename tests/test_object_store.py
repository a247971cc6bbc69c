"""Logs in object storage (issue #34): a run logs to `s3://bucket/prefix` on a real S3 API
(moto's server on 127.0.0.1, `tests/object_store.py`), ships its journal as segments, puts
its final log as one object, and resumes on another machine from what it shipped.

"Another machine" is another process with a staging directory of its own: all it shares
with the first is the bucket.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import urllib.request
from pathlib import Path
from urllib.parse import quote

import pytest

import vitals_engine as ve
from tests.children import kill, start
from tests.helpers import openai, sums, wait_until
from tests.object_store import Bucket, FaultyS3
from vitals_engine.cli import main as cli_main
from vitals_engine.storage import Store
from vitals_engine.storage.remote_lock import RemoteLock

TASK = "qa"


def _task(chat: ve.Chat, url: str, n: int = 6, **options: object) -> ve.Task:
    return ve.Task(sums(n), ve.generate(chat), ve.detect_includes(), name=TASK, dir=url, **options)


def _finals(bucket: Bucket) -> list[str]:
    return [
        k for k in bucket.listed("qa/") if k.endswith((".json", ".eval")) and "listing" not in k
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("log_format", ["json", "eval"])
async def test_a_run_puts_its_log_in_the_bucket_and_clears_its_journal(s3, tmp_path, log_format):
    """A run logging to an s3:// URL ends with its final log in the bucket, as one object
    equal to the local copy, in the bucket's listing.json, and nothing else left (no
    segments, no lock); `read_log()` reads it back from the URL, whole and header-only,
    and Inspect's reader reads the object as downloaded (the autouse check)."""
    task = _task(ve.chat_mock(), s3.url, log_format=log_format)
    await task.eval_async(progress=False)

    (key,) = _finals(s3)
    assert s3.listed("qa/") == sorted([key, "qa/listing.json"])
    data = s3.read(key)
    assert task.log_path is not None
    assert data == task.log_path.read_bytes()
    assert task.dir == s3.url
    assert key.rsplit("/", 1)[1] in json.loads(s3.read("qa/listing.json"))
    downloaded = tmp_path / "from-the-bucket" / key.rsplit("/", 1)[1]
    downloaded.parent.mkdir()
    downloaded.write_bytes(data)  # Inspect's reader reads it after the test
    url = f"s3://{key.replace('qa/', s3.name + '/qa/', 1)}"
    logged = ve.read_log(url)
    assert (logged.status, len(logged.samples)) == ("success", 6)
    assert ve.read_log(url, header_only=True).header.eval.eval_id == logged.header.eval.eval_id


def test_credentials_never_reach_a_log(s3, monkeypatch):
    """The secret key the backend finds in the environment is in no object the run
    writes: not the log, the listing, a segment or the lock."""
    secret = "s3cr3t-" + os.urandom(6).hex()
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)  # moto takes any key
    seen: list[bytes] = []
    store = Store(s3.url)
    task = _task(ve.chat_mock(), s3.url)
    original = store.__class__.put

    def spy(self: Store, name: str, data: bytes) -> None:
        seen.append(data)
        original(self, name, data)

    monkeypatch.setattr(Store, "put", spy)
    task.eval(progress=False)
    written = [s3.read(k) for k in s3.listed()] + seen
    assert seen  # the segments went through put (the listing, written conditionally, is read)
    assert all(secret.encode() not in data for data in written)
    assert all(secret.encode() not in p.read_bytes() for p in s3.staging.rglob("*") if p.is_file())


def _run_in_child(base_url: str, url: str, env: dict[str, str], n: int) -> None:
    os.environ.update(env)
    chat = ve.chat_openai("gpt-test", base_url=base_url, api_key="sk-test")
    _task(chat, url, n).eval(progress=False, max_concurrency=2)


def _shipped_samples(bucket: Bucket) -> int:
    lines = 0
    for key in bucket.listed("qa/.vitals/"):
        if key.endswith(".seg"):
            lines += bucket.read(key).count(b'{"kind":"sample"')
    return lines


def _aws_env(bucket: Bucket, staging: Path) -> dict[str, str]:
    names = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")
    env = {name: os.environ[name] for name in names}
    env |= {"AWS_ENDPOINT_URL_S3": bucket.endpoint, "AWS_MAX_ATTEMPTS": "1"}
    return env | {"VITALS_STAGING_DIR": str(staging), "VITALS_SHIP_INTERVAL": "0.05"}


def test_a_run_killed_on_one_machine_resumes_on_another(s3, server, tmp_path, monkeypatch):
    """A run killed with SIGKILL once it had shipped some samples is resumed by another
    process with a staging directory of its own: it takes over the dead run's lock,
    rebuilds the journal from the bucket, and asks the model only for the samples that
    were not shipped; the final log, in the bucket, holds every sample once."""
    n = 40
    server.latency = 0.03
    env = _aws_env(s3, tmp_path / "first-machine")
    child = start(_run_in_child, server.base_url(), s3.url, env, n)
    try:
        shipped = wait_until(lambda: _shipped_samples(s3) >= 6, "six samples shipped")
    finally:
        kill(child)
    shipped = _shipped_samples(s3)
    assert shipped < n, "the run finished before the kill: make it slower"
    assert any(k.endswith(".lock") for k in s3.listed("qa/.vitals/"))  # the dead run's

    monkeypatch.setenv("VITALS_STAGING_DIR", str(tmp_path / "second-machine"))
    first = len(server.log)
    task = _task(openai(server), s3.url, n)
    task.eval(resume=True, progress=False, max_concurrency=2)

    assert len(server.log) - first <= n - shipped
    (key,) = _finals(s3)
    logged = ve.read_log(f"s3://{s3.name}/{key}")
    assert logged.status == "success"
    assert sorted(s.id for s in logged.samples) == list(range(1, n + 1))
    assert not s3.listed("qa/.vitals/")


def _failed_run(s3: Bucket) -> ve.Task:
    def broken(sample: ve.Sample) -> str:
        raise RuntimeError("not today")

    task = ve.Task(sums(3), broken, ve.detect_includes(), name=TASK, dir=s3.url)
    with pytest.raises(ve.EvalFailedError):
        task.eval(progress=False)
    return task


def test_two_runs_resuming_one_journal_one_wins(s3):
    """While a run on another machine continues a journal (its lock fresh in the bucket),
    a second resume of it stops with `JournalInUseError` naming that machine, before it
    writes anything; once the lock is gone, the resume goes through."""
    _failed_run(s3)
    (key,) = _finals(s3)
    journal = key.rsplit("/", 1)[1].rsplit(".", 1)[0] + ".journal"
    other = RemoteLock(Store(s3.url), journal, stale_after=60)
    other._me.host = "gpu-node-7"
    other.acquire()
    before = s3.listed()

    def resume() -> None:
        resumed = ve.Task(sums(3), ve.generate(ve.chat_mock()), ve.detect_includes(), name=TASK)
        resumed.dir = s3.url
        resumed.eval(resume=True, resume_anyway=True, progress=False)

    with pytest.raises(ve.JournalInUseError, match="gpu-node-7"):
        resume()
    assert s3.listed() == before

    other.release()
    resume()
    assert ve.read_log(f"s3://{s3.name}/{key}").status == "success"


def test_two_takeovers_of_a_stale_lock_one_wins(s3):
    """Two runs taking over one stale lock at the same moment: S3's conditional write
    lets exactly one through; the other is told who holds it."""
    store = Store(s3.url)
    an_hour_ago = time.time() - 3600
    store.put(
        ".vitals/run.journal.lock",
        json.dumps({"owner": "x", "pid": 1, "host": "gone-machine", "beat": an_hour_ago}).encode(),
    )
    contenders = [RemoteLock(Store(s3.url), "run.journal", stale_after=60) for _ in range(2)]
    for lock in contenders:
        lock._me.host = "elsewhere"
    outcomes: list[str] = []
    barrier = threading.Barrier(2)

    def take(lock: RemoteLock) -> None:
        barrier.wait()
        try:
            lock.acquire()
            outcomes.append("won")
        except ve.JournalInUseError:
            outcomes.append("refused")

    threads = [threading.Thread(target=take, args=(lock,)) for lock in contenders]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(outcomes) == ["refused", "won"]


def test_listing_a_bucket(s3, capsys):
    """`read_logs()` and `vitals ls` list the logs of an s3:// URL, as of a directory."""
    for n in (2, 3):
        _task(ve.chat_mock(), s3.url, n).eval(progress=False)
    frame = ve.read_logs(s3.url)
    assert frame.height == 5
    assert frame["log"].n_unique() == 2
    assert cli_main(["ls", s3.url]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 3
    assert all("success" in line for line in out[1:])


def test_the_viewer_lists_a_bucket_by_ranged_reads(s3, s3_faults: FaultyS3):
    """`ve.view(url)` lists the bucket's logs; each header is read in ranges, so a big
    log's listing costs far fewer bytes than the log; its page's samples come whole."""
    task = _task(ve.chat_mock(), s3.url, 400)
    task.eval(progress=False)
    (key,) = _finals(s3)
    size = len(s3.read(key))
    s3_faults.served.clear()
    viewer = ve.view(s3.url, block=False)
    try:
        with urllib.request.urlopen(viewer.url + "/api/logs.json", timeout=30) as reply:
            logs = json.loads(reply.read())["logs"]
        assert [entry["status"] for entry in logs] == ["success"]
        assert logs[0]["samples"] == 400
        listed = s3_faults.served.get(f"/{s3.name}/{key}", 0)
        assert 0 < listed < size / 4
        name = logs[0]["file"]
        address = f"{viewer.url}/api/logs/{quote(name, safe='')}/summaries.json"
        with urllib.request.urlopen(address, timeout=30) as reply:
            assert len(json.loads(reply.read())["rows"]) == 400
    finally:
        viewer.stop()


def test_a_missing_bucket_is_said_at_once(s3):
    """A URL whose bucket does not exist stops the run before it starts, saying so."""
    task = _task(ve.chat_mock(), "s3://no-such-bucket-here/qa")
    with pytest.raises(ve.StoreNotFound, match="does not exist: create it"):
        task.eval(progress=False)


def test_denied_access_is_said_at_once(s3, s3_faults):
    """A store that refuses the credentials stops the run before it starts, saying what
    to check."""
    s3_faults.mode = "denied"
    task = _task(ve.chat_mock(), s3.url)
    with pytest.raises(ve.StoreAccessDenied, match="AWS_ACCESS_KEY_ID"):
        task.eval(progress=False)


def test_a_throttled_store_loses_nothing(s3, s3_faults, server, caplog):
    """A store that answers 503 SlowDown from the run's first shipped segment to its end:
    the run finishes, warns once that shipping fails (retrying, the journal whole here)
    and once that its log is kept on this disk, naming it; that log holds every sample."""
    caplog.set_level(logging.WARNING, logger="vitals_engine")
    n = 20
    server.latency = 0.05

    def throttle_once_shipping() -> None:
        wait_until(lambda: any(k.endswith(".seg") for k in s3.listed("qa/.vitals/")), "a segment")
        s3_faults.mode = "slowdown"

    thread = threading.Thread(target=throttle_once_shipping, daemon=True)
    thread.start()
    task = _task(openai(server), s3.url, n)
    task.eval(progress=False, max_concurrency=2)
    thread.join(30)

    assert s3_faults.refused > 0
    assert task.log_path is not None
    assert len(ve.read_log(task.log_path).samples) == n
    messages = [r.getMessage() for r in caplog.records]
    shipping = [m for m in messages if "cannot ship the journal" in m]
    kept = [m for m in messages if "could not be put in the store" in m]
    assert len(shipping) == 1
    assert "503 SlowDown" in shipping[0]
    assert "Retrying" in shipping[0]
    assert len(kept) == 1
    assert str(task.log_path) in kept[0]
    assert not _finals(s3)


def test_a_store_throttled_for_a_while_gets_the_whole_run(s3, s3_faults, server, caplog):
    """A store that answers 503 SlowDown to a few requests mid-run, then recovers: the
    shipper says so once, retries with backoff, says it ships again, and the final log
    lands in the bucket with every sample."""
    caplog.set_level(logging.WARNING, logger="vitals_engine")
    n = 20
    server.latency = 0.05

    def throttle_a_while() -> None:
        wait_until(lambda: any(k.endswith(".seg") for k in s3.listed("qa/.vitals/")), "a segment")
        s3_faults.budget, s3_faults.mode = 3, "slowdown"

    thread = threading.Thread(target=throttle_a_while, daemon=True)
    thread.start()
    task = _task(openai(server), s3.url, n)
    task.eval(progress=False, max_concurrency=2)
    thread.join(30)

    assert s3_faults.refused == 3
    messages = [r.getMessage() for r in caplog.records]
    assert sum("cannot ship the journal" in m for m in messages) == 1
    assert sum("shipping the journal to the store again" in m for m in messages) == 1
    (key,) = _finals(s3)
    assert len(ve.read_log(f"s3://{s3.name}/{key}").samples) == n


@pytest.mark.usefixtures("local_ray")
def test_a_ray_run_logs_to_the_bucket(s3):
    """On Ray the driver writes the log: to an s3:// URL as for a local run, the workers
    never touching the store. The bucket ends with the one final log, every sample in it."""
    pytest.importorskip("ray")
    task = _task(ve.chat_mock(), s3.url, n=12)
    task.eval(backend=ve.Ray(workers=2), progress=False)
    (key,) = _finals(s3)
    url = f"s3://{key.replace('qa/', s3.name + '/qa/', 1)}"
    logged = ve.read_log(url)
    assert (logged.status, sorted(sample.id for sample in logged.samples)) == (
        "success",
        list(range(1, 13)),
    )
    assert not [k for k in s3.listed("qa/") if "/.vitals/" in k or k.endswith(".seg")]


def test_runs_finishing_together_each_get_their_listing_entry(s3, monkeypatch):
    """Twelve runs finishing at the same moment in one s3:// folder, each having read the
    bucket's `listing.json` before any wrote it (the worst interleaving, forced): the
    listing ends with all twelve logs, as the store's conditional writes allow no
    write based on a listing that changed since it was read."""
    runs = 12
    read_together = threading.Barrier(runs, timeout=60)
    waited: set[int] = set()

    def first_read_together(read):  # what a run first reads of the listing, all at once
        def reading(self: Store, name: str, *args):
            if name == "listing.json" and threading.get_ident() not in waited:
                waited.add(threading.get_ident())
                read_together.wait()
            return read(self, name, *args)

        return reading

    monkeypatch.setattr(Store, "get", first_read_together(Store.get))
    monkeypatch.setattr(Store, "info", first_read_together(Store.info))
    tasks = [_task(ve.chat_mock(), s3.url, 2) for _ in range(runs)]
    threads = [threading.Thread(target=task.eval, kwargs={"progress": False}) for task in tasks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads)
    listing = json.loads(s3.read("qa/listing.json"))
    assert sorted(listing) == sorted(key.rsplit("/", 1)[1] for key in _finals(s3))
    assert len(listing) == runs
