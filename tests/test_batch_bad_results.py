"""A batch's results as providers have been seen to serve them, over the mock server's
real batch APIs, on both anyio backends: bad lines (junk, a truncated last line, a
custom id missing, null or a number, a duplicate) lose only their own requests, which
are reported once per batch and sent again in a later batch; a request the provider
counts as done but whose result is missing is asked for again, never sent again, and
fails its sample if the provider cannot give it; a request that keeps expiring goes in
a batch four times at most (sent again three times, as the README says)."""

from __future__ import annotations

import collections
import functools
import json
import logging

import anyio
import pytest

import vitals_engine as ve
from tests.helpers import sums
from tests.test_batch_resume import cancel_once_batches_are_out
from tests.test_batch_resume import sums_task as resume_task
from vitals_engine.log.logged_batches import logged_batches

pytestmark = pytest.mark.anyio

MAKERS = {
    "openai": ve.chat_openai,
    "openai_responses": functools.partial(ve.chat_openai, api="responses"),
    "anthropic": ve.chat_anthropic,
    "google": ve.chat_google_gemini,
}
PROVIDERS = list(MAKERS)
QUICK = ve.Batch(size=12, wait=60, poll=0.02)  # a batch goes full, or once every sample waits
FAST_RETRY = ve.Retry(backoff=0.01, max_backoff=0.01)
FLAWS = ("no-id", "null-id", "numeric-id", "duplicate", "junk", "truncated")


def sums_task(server, tmp_path, n, provider):
    fmt = "openai" if provider == "openai_responses" else provider
    model = MAKERS[provider](f"{provider}-test-model", base_url=server.base_url(fmt), api_key="k")
    return ve.Task(sums(n), solver=ve.generate(model), scorer=ve.detect_includes(), dir=tmp_path)


def submissions_per_request(server):
    """How many times each request (by its body) came in an accepted batch, from the mock
    server's count of custom ids (`batch_submissions`), and the custom ids it came under."""
    ids: dict[str, set[str]] = collections.defaultdict(set)
    for batch in server.batches.values():
        for item in batch.items:
            ids[json.dumps(item.body, sort_keys=True)].add(item.custom_id)
    counts = {
        body: sum(server.batch_submissions[cid] for cid in cids) for body, cids in ids.items()
    }
    return counts, ids


def batch_warnings(caplog):
    return [r.getMessage() for r in caplog.records if "results of batch" in r.getMessage()]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_bad_lines_lose_only_their_requests_which_go_in_a_later_batch(
    server, tmp_path, provider, caplog
):
    """Twelve requests in one batch whose results carry a line without a custom id, one
    with a null id, one with a number, a duplicate of another request's line, a junk line
    and a truncated last line: the eight good lines are taken (the duplicate's first line
    kept), one warning names the batch and its six bad lines, its record in the log notes
    them, and the four requests whose lines could not be read go in a later batch."""
    caplog.set_level(logging.WARNING, logger="vitals_engine")
    server.batch_delay = 0
    server.spoil_batch_results(*FLAWS)
    task = sums_task(server, tmp_path, 12, provider)
    await task.eval_async(batch=QUICK, retry=FAST_RETRY, progress=False)

    assert task.metrics == {"accuracy": 1.0}
    assert ve.read_log(task.log_path).status == "success"
    first, *later = sorted(server.batches.values(), key=lambda b: b.created_at)
    assert len(first.custom_ids) == 12
    assert sum(len(b.custom_ids) for b in later) == 4  # the four unreadable ones, once more
    counts, _ = submissions_per_request(server)
    assert sorted(counts.values()) == [1] * 8 + [2] * 4
    (warning,) = batch_warnings(caplog)
    assert first.id in warning
    assert "6 lines" in warning
    assert "duplicate" in warning
    [record] = [b for b in ve.read_log(task.log_path).batches if b.id == first.id]
    assert record.notes
    assert any("duplicate" in note for note in record.notes)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_duplicate_line_keeps_the_first_outcome(server, tmp_path, provider, caplog):
    """A second line for a request, carrying another request's answer: the first is
    kept (every sum is right), the second reported, nothing sent again."""
    caplog.set_level(logging.WARNING, logger="vitals_engine")
    server.batch_delay = 0
    server.spoil_batch_results("duplicate")
    task = sums_task(server, tmp_path, 4, provider)
    await task.eval_async(batch=QUICK, progress=False)
    assert task.metrics == {"accuracy": 1.0}
    assert len(server.batches) == 1
    (warning,) = batch_warnings(caplog)
    assert "duplicate" in warning


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_result_missing_from_the_file_is_asked_for_again_not_sent_again(
    server, tmp_path, provider
):
    """The provider counts all six completed but its first results lack two: the run
    asks for the results again and takes them; nothing is sent twice."""
    server.batch_delay = 0
    server.spoil_batch_results(lost=2, reads=1)
    task = sums_task(server, tmp_path, 6, provider)
    await task.eval_async(batch=QUICK, progress=False)
    assert task.metrics == {"accuracy": 1.0}
    assert len(server.batches) == 1
    counts, _ = submissions_per_request(server)
    assert sorted(counts.values()) == [1] * 6


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_result_the_provider_lost_fails_its_sample_saying_so(
    server, tmp_path, provider, caplog
):
    """The provider counts all six completed, but two results are never in its files,
    however often asked: those two samples fail with an error saying the provider lost
    their results; they are not sent again (they were paid for)."""
    caplog.set_level(logging.WARNING, logger="vitals_engine")
    server.batch_delay = 0
    server.spoil_batch_results(lost=2, reads=None)
    task = sums_task(server, tmp_path, 6, provider)
    await task.eval_async(batch=QUICK, retry=FAST_RETRY, fail_on_error=False, progress=False)
    failed = [r for r in ve.read_log(task.log_path).records() if r.error is not None]
    assert len(failed) == 2
    assert all("lost" in str(r.error) for r in failed)
    assert len(server.batches) == 1
    counts, _ = submissions_per_request(server)
    assert sorted(counts.values()) == [1] * 6
    (warning,) = batch_warnings(caplog)
    assert "lost" in warning


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_request_that_keeps_expiring_goes_in_four_batches_at_most(
    server, tmp_path, provider
):
    """Every batched request expires: each is sent again three times (the README's
    limit), under the same custom id, then fails its sample; the retry policy does not
    send it again."""
    server.batch_delay = 0
    server.fail_in_batch("expired", times=None)
    task = sums_task(server, tmp_path, 2, provider)
    await task.eval_async(batch=QUICK, retry=FAST_RETRY, fail_on_error=False, progress=False)
    failed = [r for r in ve.read_log(task.log_path).records() if r.error is not None]
    assert len(failed) == 2
    assert all("expired" in str(r.error) for r in failed)
    counts, ids = submissions_per_request(server)
    assert sorted(counts.values()) == [4, 4]
    assert all(len(cids) == 1 for cids in ids.values())
    assert set(server.batch_submissions.values()) == {4}


@pytest.mark.parametrize("provider", ["openai", "anthropic", "google"])
async def test_a_resumed_run_takes_the_good_lines_of_a_spoiled_batch(server, tmp_path, provider):
    """A run cancelled with its batches left out; their results come back with a null
    custom id, a junk line and a truncated last line on every read. Resumed, the run takes
    the good lines and sends only the two requests of each batch it could not read."""
    server.batch_delay = 3600
    server.spoil_batch_results("null-id", "junk", "truncated", times=3)
    logs = tmp_path / "logs"
    keep = ve.Batch(size=10, wait=0.05, poll=0.02, max_pending=30, cancel_batches=False)
    first = resume_task(server, logs, provider)
    with anyio.fail_after(60):
        await cancel_once_batches_are_out(first, logs, keep)
    assert ve.read_log(first.log_path).status == "cancelled"
    server.end_batches()
    server.batch_delay = 0.02  # for the batches the resumed run sends

    again = resume_task(server, logs, provider)
    await again.eval_async(
        resume=True, batch=ve.Batch(size=10, wait=0.05, poll=0.02), retry=FAST_RETRY, progress=False
    )
    logged = ve.read_log(again.log_path)
    assert logged.status == "success"
    assert again.metrics == {"accuracy": 1.0}
    assert sum(server.batch_submissions.values()) == 25 + 6
    assert len(logged_batches(logged.header)) >= 4
