"""Input checks: numbers that cannot make sense are refused at once, huge ones are harmless."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

import vitals_engine as ve
from tests.test_view import api_path, write_synthetic_log
from vitals_engine.engine.supervisor import Supervisor
from vitals_engine.samples import SampleRecord
from vitals_engine.viewer.launch import view
from vitals_engine.viewer.server import ViewServer

pytestmark = pytest.mark.anyio

NAN, INF = math.nan, math.inf


# -- max_concurrency above the work there is ---------------------------------------------------


async def test_a_huge_max_concurrency_runs_two_samples(tmp_path: Path) -> None:
    """max_concurrency=10**12 on 2 samples starts 2 workers, not 10**12: the run finishes."""
    task = ve.Task(
        [{"input": "What's 2+2?", "target": "4"}, {"input": "What's 1+1?", "target": "2"}],
        solver=ve.generate(ve.chat_mock()),
        scorer=ve.detect_includes(),
        dir=tmp_path,
    )
    with anyio.fail_after(30):
        await task.eval_async(max_concurrency=10**12)
    assert task.get_samples()["score"].to_list() == ["C", "C"]


async def test_the_supervisor_starts_no_more_workers_than_records() -> None:
    """Given how many records there are, each stage starts at most that many workers."""
    started: list[int] = []
    done: list[SampleRecord] = []

    async def stage(record: SampleRecord) -> None:
        started.append(1)

    async def sink(record: SampleRecord) -> None:
        done.append(record)

    records = [SampleRecord(ve.Sample(id=i, epoch=1, input="a", target="a")) for i in (1, 2)]
    supervisor = Supervisor(
        solve=stage, score=stage, sink=sink, concurrency=10**12, total=len(records)
    )
    with anyio.fail_after(30):
        await supervisor.run(iter(records))
    assert len(done) == 2
    assert len(started) == 4


def test_a_huge_httpx_pool_makes_a_bounded_number_of_clients() -> None:
    """The httpx transport shards its pool; a pool of 10**12 must not mean 10**11 clients."""
    from vitals_engine.transport.httpx_client import MAX_SHARDS, HttpxTransport

    shards = HttpxTransport(pool_size=10**12)._new_shards(None)
    assert len(shards.clients) == MAX_SHARDS


# -- non-finite and negative numbers -------------------------------------------------------------


def refusal(option: Any, field: str, value: float) -> str:
    """The ConfigError's message for `option(field=value)`, which names the field and value."""
    with pytest.raises(ve.ConfigError) as caught:
        option(**{field: value})
    message = str(caught.value)
    assert field in message
    assert repr(value) in message
    return message


@pytest.mark.parametrize("field", ["max_concurrency", "rpm", "tpm"])
@pytest.mark.parametrize("value", [NAN, INF, -INF, -1])
def test_limits_refuse_numbers_that_are_not_finite_and_positive(field: str, value: float) -> None:
    message = refusal(ve.Limits, field, value)
    assert "positive" in message


@pytest.mark.parametrize("field", ["timeout", "sample_timeout", "backoff", "max_backoff"])
@pytest.mark.parametrize("value", [NAN, INF, -INF, -1.0])
def test_retry_refuses_numbers_that_are_not_finite_and_positive(field: str, value: float) -> None:
    refusal(ve.Retry, field, value)


@pytest.mark.parametrize("value", [NAN, INF, 1.5])
def test_retry_max_attempts_must_be_a_whole_number(value: float) -> None:
    with pytest.raises(ve.ConfigError, match="max_attempts"):
        ve.Retry(max_attempts=value)  # type: ignore[arg-type]


def test_retry_accepts_no_backoff() -> None:
    """backoff=0 retries at once: allowed."""
    assert ve.Retry(backoff=0, max_backoff=0).backoff == 0


@pytest.mark.parametrize("field", ["connect", "read", "total"])
@pytest.mark.parametrize("value", [NAN, INF, -INF, -1.0, 0])
def test_timeouts_refuse_numbers_that_are_not_finite_and_positive(field: str, value: float) -> None:
    message = refusal(ve.Timeouts, field, value)
    assert "positive finite" in message


def test_timeouts_take_none_for_no_total_deadline() -> None:
    assert ve.Timeouts(connect=0.5, read=1, total=None).total is None


@pytest.mark.parametrize(
    "option", ["max_concurrency", "epochs", "fail_on_error"], ids=lambda name: name
)
@pytest.mark.parametrize("value", [NAN, INF, -1.0])
async def test_task_options_refuse_numbers_that_are_not_finite(
    tmp_path: Path, option: str, value: float
) -> None:
    task = ve.Task(
        [{"input": "x", "target": "x"}], solver=ve.generate(ve.chat_mock()), dir=tmp_path
    )
    with pytest.raises(ve.ConfigError, match=option):
        await task.eval_async(**{option: value})


# -- the viewer ----------------------------------------------------------------------------------


@pytest.mark.parametrize("since", ["9" * 5000, "1" * 25, "²", "-1", "abc"])
def test_a_since_that_is_not_a_version_is_a_400(tmp_path: Path, since: str) -> None:
    name = write_synthetic_log(tmp_path, 3).name
    with (
        ViewServer(tmp_path).start() as running,
        httpx.Client(base_url=running.url, timeout=10) as http,
    ):
        answer = http.get(api_path(name, "summaries.json"), params={"since": since})
        assert answer.status_code == 400
        assert "since" in answer.json()["error"]
        assert http.get(api_path(name, "summaries.json"), params={"since": "0"}).status_code == 200


def test_viewing_on_a_non_loopback_host_warns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Serving on 0.0.0.0 turns off the Host-header check: view() says so on stderr."""
    running = view(tmp_path, host="0.0.0.0", port=None, block=False, open_browser=False)
    try:
        err = capsys.readouterr().err
    finally:
        running.stop()
    assert "0.0.0.0" in err
    assert "network" in err
    assert "Host" in err


def test_viewing_on_loopback_does_not_warn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    running = view(tmp_path, block=False, open_browser=False)
    running.stop()
    assert capsys.readouterr().err == ""
