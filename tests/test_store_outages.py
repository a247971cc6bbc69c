"""A store that stops answering (issue #48): a run cut off from its store stops taking
samples before its lock on the journal can lapse, goes on when the store answers again,
stops when another machine took over meanwhile or when the store stays away, and a store
dead at the end costs a bounded time, after which the log is kept here and named.

The store is moto's S3 server behind `FaultyS3` (`tests/object_store.py`), which drops
every connection while told to. Bounds are configured small: a lease of 1 s
(`VITALS_STORE_LEASE`), a dead store given up after 2 or 3 s where a test waits for that
(`VITALS_STORE_TIMEOUT`; less, and a healthy store slowed down by a loaded machine could
be given up too).
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.to_thread
import pytest

import vitals_engine as ve
from tests.helpers import PATIENCE, openai, sums, wait_until
from tests.object_store import Bucket, FaultyS3

TASK = "qa"
LEASE = 1.0


def _task(chat: ve.Chat, url: str, n: int) -> ve.Task:
    return ve.Task(sums(n), ve.generate(chat), ve.detect_includes(), name=TASK, dir=url)


class _Running:
    """`task.eval()` on a thread of its own: what it raised, once it ended."""

    def __init__(self, task: ve.Task, **options: Any) -> None:
        self.error: BaseException | None = None

        def run() -> None:
            try:
                task.eval(progress=False, **options)
            except BaseException as exc:
                self.error = exc

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    @property
    def ended(self) -> bool:
        return not self.thread.is_alive()

    def wait(self) -> BaseException | None:
        self.thread.join(PATIENCE)
        assert self.ended, f"the run did not end in {PATIENCE:g} s"
        return self.error


def _shipped(s3: Bucket, samples: int) -> Callable[[], bool]:
    def enough() -> bool:
        data = b"".join(s3.read(k) for k in s3.listed("qa/.vitals/") if k.endswith(".seg"))
        return data.count(b'{"kind":"sample"') >= samples

    return enough


def _lock(s3: Bucket) -> tuple[str, dict]:
    """The lock object of the run's journal, read from the bucket behind the proxy."""
    (key,) = [k for k in s3.listed("qa/.vitals/") if k.endswith(".lock")]
    return key, json.loads(s3.read(key))


def _said(caplog: pytest.LogCaptureFixture, words: str) -> list[str]:
    return [r.getMessage() for r in list(caplog.records) if words in r.getMessage()]


def _fenced(caplog: pytest.LogCaptureFixture) -> bool:
    """Whether the run says it takes no sample now: its last word on it is a fence."""
    said = [
        "stopped taking samples" in m
        for m in (r.getMessage() for r in list(caplog.records))
        if "stopped taking samples" in m or "taking samples again" in m
    ]
    return bool(said) and said[-1]


@pytest.fixture
def cut_off(s3, s3_faults, server, monkeypatch, caplog) -> FaultyS3:
    """A lease of `LEASE` s, a store given up after 30 s, warnings captured, a slowish model."""
    monkeypatch.setenv("VITALS_STORE_LEASE", str(LEASE))
    monkeypatch.setenv("VITALS_STORE_TIMEOUT", "30")
    caplog.set_level(logging.WARNING, logger="vitals_engine")
    server.latency = 0.05
    return s3_faults


@pytest.mark.anyio
async def test_a_run_cut_off_from_its_store_waits_and_goes_on_when_it_answers(
    s3, cut_off, server, caplog
):
    """A run whose store stops answering stops taking samples before its lease could
    lapse, saying so; when the store answers again it takes samples again, and its final
    log lands in the bucket with every sample, each asked once."""
    n = 80
    task = _task(openai(server), s3.url, n)
    ended = anyio.Event()

    async def run() -> None:
        try:
            await task.eval_async(progress=False, max_concurrency=2)
        finally:
            ended.set()

    def waiting(condition: Callable[[], object], what: str) -> Awaitable[object]:
        return anyio.to_thread.run_sync(wait_until, lambda: condition() or ended.is_set(), what)

    asked = n
    with anyio.fail_after(PATIENCE):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await waiting(_shipped(s3, 3), "three samples shipped")
            cut_off.mode = "down"
            await waiting(lambda: _fenced(caplog), "a fence")
            assert _fenced(caplog), "the run went on without its store"
            asked = len(server.log)
            cut_off.mode = None

    assert _said(caplog, "taking samples again")
    assert asked < n
    assert len(server.log) == n
    (key,) = [k for k in s3.listed("qa/") if k.endswith(".json") and "listing" not in k]
    logged = ve.read_log(f"s3://{s3.name}/{key}")
    assert sorted(sample.id for sample in logged.samples) == list(range(1, n + 1))


def test_a_run_cut_off_while_another_takes_over_buys_nothing_past_its_lease(
    s3, cut_off, server, caplog
):
    """A run whose store stops answering takes no sample once its lease could have
    lapsed, and ships nothing more; when another machine has taken its lock over
    meanwhile, the run stops once the store answers, naming the run that continues the
    journal."""
    n = 80
    running = _Running(_task(openai(server), s3.url, n), max_concurrency=2)
    wait_until(lambda: _shipped(s3, 3)() or running.ended, "three samples shipped")
    cut_off.mode = "down"
    wait_until(lambda: _fenced(caplog) or running.ended, "a fence")
    key, held = _lock(s3)
    lapsed = held["beat"] + LEASE
    wait_until(lambda: time.time() > lapsed, "the lease to lapse")
    taker = dict(held, owner="another-machine", host="gpu-node-7", beat=lapsed)
    s3.client.put_object(Bucket=s3.name, Key=key, Body=json.dumps(taker).encode())
    shipped = s3.listed("qa/.vitals/")
    cut_off.mode = None

    error = running.wait()
    assert max(request.at for request in server.log) <= lapsed
    assert len(server.log) < n
    assert isinstance(error, ve.JournalInUseError), error
    assert "gpu-node-7" in str(error)
    assert s3.listed("qa/.vitals/") == shipped


def test_a_run_whose_store_stays_away_stops_cleanly(s3, cut_off, server, caplog, monkeypatch):
    """A run whose store does not answer for `VITALS_STORE_TIMEOUT` seconds stops with a
    `StoreUnreachable` saying so, what to do, and where its log is: a local log holding
    every sample that finished, none asked past the lease."""
    monkeypatch.setenv("VITALS_STORE_TIMEOUT", "2")
    n = 80
    running = _Running(_task(openai(server), s3.url, n), max_concurrency=2)
    wait_until(lambda: _shipped(s3, 3)() or running.ended, "three samples shipped")
    cut_off.mode = "down"

    error = running.wait()
    _, held = _lock(s3)
    assert max(request.at for request in server.log) <= held["beat"] + LEASE
    assert isinstance(error, ve.StoreUnreachable), error
    message = str(error)
    assert "resume" in message
    local = re.search(r"on this disk, (\S+?\.json)", message)
    assert local is not None, message
    logged = ve.read_log(local.group(1))
    assert {sample.id for sample in logged.samples} <= set(range(1, n + 1))
    assert len(logged.samples) == len({request.request.prompt for request in server.log})


@pytest.mark.anyio
async def test_a_store_dead_at_the_end_costs_a_bounded_time(s3, s3_faults, monkeypatch, caplog):
    """A store that drops every connection once the samples are done: with the backend's
    own retries as they come (s3fs's five, botocore's), a run returns once
    `VITALS_STORE_TIMEOUT` seconds are spent on it, with a warning that names the local log,
    which holds every sample."""
    import s3fs

    monkeypatch.setattr(s3fs.S3FileSystem, "retries", 5)
    monkeypatch.delenv("AWS_MAX_ATTEMPTS")
    s3fs.S3FileSystem.clear_instance_cache()
    monkeypatch.setenv("VITALS_STORE_TIMEOUT", "3")
    caplog.set_level(logging.WARNING, logger="vitals_engine")
    n = 60
    solved = []

    def solver(input: str, sample: ve.Sample) -> str:
        solved.append(sample.id)
        if len(solved) == n:
            s3_faults.mode = "down"
        return str(2 * (int(sample.id) - 1))

    task = ve.Task(sums(n), solver, ve.detect_includes(), name=TASK, dir=s3.url)
    with anyio.fail_after(PATIENCE):
        await task.eval_async(progress=False)
    kept = _said(caplog, "kept at")
    assert kept, [r.getMessage() for r in caplog.records]
    assert task.log_path is not None
    assert str(task.log_path) in kept[0]
    assert "3 s" in kept[0]
    assert len(ve.read_log(task.log_path).samples) == n
