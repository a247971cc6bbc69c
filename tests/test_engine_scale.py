"""The engine against a real (mock) provider: 429 storms, 5xx, hangs, limits, cost by role,
streaming and progress."""

from __future__ import annotations

import collections
import io
import itertools
import threading

import anyio
import pytest

import vitals_engine as ve
from tests import helpers
from tests.helpers import openai, sums
from tests.inspect_check import assert_inspect_reads
from vitals_engine.pacing.limits import LimitsRegistry, RateLimits
from vitals_engine.testing.clock import VirtualClock

pytestmark = pytest.mark.anyio


def attempts_by_prompt(server):
    seen = collections.defaultdict(list)
    for record in server.log:
        seen[record.request.prompt].append(record)
    return seen


async def test_a_429_storm_finishes_every_sample_and_honours_retry_after(server, tmp_path):
    """With half the requests answered 429 + Retry-After (a storm), every sample finishes, no
    sample's retry arrives before its Retry-After, and the endpoint backs off."""
    server.failure_rate(0.5, "429", retry_after=0.2)
    task = ve.Task(
        sums(40), solver=ve.generate(openai(server)), scorer=ve.detect_includes(), dir=tmp_path
    )
    await task.eval_async(max_concurrency=10, retry=ve.Retry(max_attempts=40))
    assert task.metrics == {"accuracy": 1.0}
    limited = [r for r in server.log if r.outcome == "429"]
    assert limited, "the storm produced no 429s"
    for tries in attempts_by_prompt(server).values():
        for failed, retried in itertools.pairwise(tries):
            assert retried.at >= failed.answered + 0.2
    full = assert_inspect_reads(task.log_path, task)
    assert any(c.reason == "rate_limit" for c in full.stats.connection_limit_history)


async def test_a_429_pauses_every_caller_of_the_endpoint(server, tmp_path):
    """On an rpm-limited model, after a 429 with Retry-After no request reaches it until the
    Retry-After has passed: not the queued samples', not the limited one's retry."""
    server.fail("429", retry_after=0.5)
    server.latency = 0.05
    task = ve.Task(
        sums(8), solver=ve.generate(openai(server)), scorer=ve.detect_includes(), dir=tmp_path
    )
    await task.eval_async(max_concurrency=8, rate_limits=ve.RateLimits(max_concurrency=2, rpm=6000))
    assert task.metrics == {"accuracy": 1.0}
    (limited,) = [r for r in server.log if r.outcome == "429"]
    later = [r for r in server.log if r.at > limited.answered]
    assert len(later) >= 6  # at most 2 requests could go out before the 429 came back
    assert all(r.at >= limited.answered + 0.5 for r in later)


async def test_retries_are_recorded_on_the_sample(server, tmp_path):
    """A sample whose call was retried keeps the count and the reason."""
    server.fail("503", times=2)
    task = ve.Task(
        sums(1), solver=ve.generate(openai(server)), scorer=ve.detect_includes(), dir=tmp_path
    )
    await task.eval_async(retry=ve.Retry(max_attempts=3, backoff=0.01))
    (record,) = task._state.records
    assert record.retries == 2
    (call,) = record.calls
    assert [note.reason.split(":")[0] for note in call.retries] == ["HTTP 503", "HTTP 503"]
    assert task.get_samples()["result"].to_list() == ["0 + 0 = 0"]


async def test_non_retryable_errors_fail_the_sample_at_once(server, tmp_path):
    """A 400 is not retried: one request, the sample fails, the others finish."""
    server.fail("400", times=1)
    task = ve.Task(
        sums(3), solver=ve.generate(openai(server)), scorer=ve.detect_includes(), dir=tmp_path
    )
    await task.eval_async(max_concurrency=1, fail_on_error=1)
    assert server.requests == 3
    errors = task.get_samples()["error"].to_list()
    assert errors[0].startswith("ProviderError while solving")
    assert errors[1:] == [None, None]


async def test_too_many_failures_raise_after_logging(server, tmp_path):
    """Beyond fail_on_error the run raises EvalFailedError naming the count, after the log."""
    server.fail("503", times=None)  # a client error on every call would stop the run instead
    task = ve.Task(
        sums(4), solver=ve.generate(openai(server)), scorer=ve.detect_includes(), dir=tmp_path
    )
    with pytest.raises(ve.EvalFailedError, match=r"4 of 4 samples failed .*HTTP 503"):
        await task.eval_async(fail_on_error=0.5, retry=ve.Retry(max_attempts=1))
    full = assert_inspect_reads(task.log_path)
    assert full.status == "error"
    assert len(full.samples) == 4


async def test_fraction_of_failures_within_allowance_is_success(server, tmp_path):
    """With fail_on_error=0.5, one failure in four leaves the run a success."""
    server.fail("400", times=1)
    task = ve.Task(
        sums(4), solver=ve.generate(openai(server)), scorer=ve.detect_includes(), dir=tmp_path
    )
    await task.eval_async(max_concurrency=1, fail_on_error=0.5)
    assert assert_inspect_reads(task.log_path).status == "success"


async def test_a_hanging_request_times_out_and_is_retried(server, tmp_path):
    """A request that hangs past Retry(timeout=) counts as a timeout and is tried again."""
    server.fail("hang", times=1)
    task = ve.Task(
        sums(1), solver=ve.generate(openai(server)), scorer=ve.detect_includes(), dir=tmp_path
    )
    await task.eval_async(retry=ve.Retry(timeout=0.3, backoff=0.01))
    assert task.metrics == {"accuracy": 1.0}
    (record,) = task._state.records
    assert "ProviderTimeout" in record.calls[0].retries[0].reason


async def test_sample_timeout_fails_only_that_sample(server, tmp_path):
    """A sample running past sample_timeout fails with SampleTimeout; the rest finish."""
    server.fail("hang", times=1)
    task = ve.Task(
        sums(3), solver=ve.generate(openai(server)), scorer=ve.detect_includes(), dir=tmp_path
    )
    await task.eval_async(max_concurrency=1, fail_on_error=1, retry=ve.Retry(sample_timeout=0.3))
    errors = task.get_samples()["error"].to_list()
    assert errors[0] == (
        "SampleTimeout while solving: the sample took longer than its sample_timeout of 0.3s"
    )
    assert errors[1:] == [None, None]


async def test_model_limits_bound_requests_in_flight(server, tmp_path):
    """A model's RateLimits(max_concurrency=2) holds it to 2 requests in flight, solver and judge
    together, whatever the run's concurrency."""
    server.latency = 0.02
    chat = openai(server, rate_limits=ve.RateLimits(max_concurrency=2))
    task = ve.Task(
        sums(12),
        solver=ve.generate(chat),
        scorer=ve.model_graded_qa(scorer_chat=chat),
        dir=tmp_path,
    )
    await task.eval_async(max_concurrency=12)
    assert server.requests == 24
    assert server.peak_in_flight == 2


async def test_run_limits_apply_to_every_model(server, tmp_path):
    """eval(rate_limits=RateLimits(max_concurrency=3)) caps each model of the run."""
    server.latency = 0.02
    task = ve.Task(
        sums(12), solver=ve.generate(openai(server)), scorer=ve.detect_includes(), dir=tmp_path
    )
    await task.eval_async(max_concurrency=12, rate_limits=ve.RateLimits(max_concurrency=3))
    assert server.peak_in_flight == 3


async def test_cost_by_role_with_two_providers(server, tmp_path):
    """Solver on OpenAI and judge on Anthropic are costed per role and model, exactly."""
    ve.set_price("OpenAI", "gpt-priced", input=2.0, output=8.0)
    ve.set_price("Anthropic", "claude-priced", input=3.0, output=15.0)
    judge = ve.chat_anthropic(
        "claude-priced", base_url=server.base_url("anthropic"), api_key="sk-ant"
    )
    task = ve.Task(
        sums(5),
        solver=ve.generate(openai(server, "gpt-priced")),
        scorer=ve.model_graded_qa(scorer_chat=judge),
        dir=tmp_path,
    )
    await task.eval_async()
    cost = task.get_cost()
    assert cost.select("role", "provider", "model", "requests").rows() == [
        ("solver", "OpenAI", "gpt-priced", 5),
        ("scorer", "Anthropic", "claude-priced", 5),
    ]
    frame = task.get_samples()
    for role, column, price in (
        ("solver", "solver_chat", (2.0, 8.0)),
        ("scorer", "scorer_chat", (3.0, 15.0)),
    ):
        chats = frame[column].to_list()
        tokens_in = sum(int(c.get_tokens()["input"].sum()) for c in chats)
        tokens_out = sum(int(c.get_tokens()["output"].sum()) for c in chats)
        row = cost.filter(cost["role"] == role).row(0, named=True)
        assert (row["input_tokens"], row["output_tokens"]) == (tokens_in, tokens_out)
        expected = (tokens_in * price[0] + tokens_out * price[1]) / 1e6
        assert row["cost"] == pytest.approx(expected)


async def test_stream_yields_each_sample_as_it_finishes(tmp_path):
    """stream_async() yields every solved-and-scored sample, then the run is logged."""
    task = ve.Task(
        sums(6), solver=ve.generate(ve.chat_mock()), scorer=ve.detect_includes(), dir=tmp_path
    )
    seen = []
    async with task.stream_async(epochs=2) as samples:
        async for record in samples:
            assert record.score is not None
            seen.append(record.key)
    assert sorted(seen) == sorted((i, e) for i in range(1, 7) for e in (1, 2))
    assert task.metrics == {"accuracy": 1.0}
    assert assert_inspect_reads(task.log_path).status == "success"


async def test_a_slow_consumer_slows_the_run(tmp_path):
    """While the consumer holds a sample, the run cannot get far ahead of it."""
    solved = 0

    async def solver(input):
        nonlocal solved
        solved += 1
        return input

    task = ve.Task(sums(200), solver=solver, scorer=ve.detect_includes(), dir=tmp_path)
    async with task.stream_async(max_concurrency=4) as samples:
        async for _ in samples:
            await anyio.wait_all_tasks_blocked()
            assert solved <= 4 * 5 + 2  # what the bounded queues and workers hold, not 200
            break


async def test_leaving_the_stream_early_cancels_and_logs(tmp_path):
    """Breaking out of the stream stops the run; what finished is logged as cancelled."""
    task = ve.Task(
        sums(100), solver=ve.generate(ve.chat_mock()), scorer=ve.detect_includes(), dir=tmp_path
    )
    async with task.stream_async(max_concurrency=2) as samples:
        async for _ in samples:
            break
    full = assert_inspect_reads(task.log_path)
    assert full.status == "cancelled"
    assert 1 <= len(full.samples) < 100


def test_a_stream_outside_async_with_says_how_to_use_it(tmp_path):
    """Iterating the stream without `async with` is an error that shows the right form."""
    task = ve.Task(sums(1), solver=ve.generate(ve.chat_mock()), scorer=ve.detect_includes())
    with pytest.raises(ve.TaskStateError, match=r"async with task\.stream_async"):
        task.stream_async().__aiter__()


def test_progress_bar_is_drawn_when_asked(tmp_path, capsys):
    """eval(progress=True) draws done/total on stderr; progress=False prints nothing."""
    task = ve.Task(
        sums(5),
        solver=ve.generate(ve.chat_mock()),
        scorer=ve.detect_includes(),
        dir=tmp_path,
        name="bar",
    )
    task.eval(progress=True)
    err = capsys.readouterr().err
    assert "bar [########################] 5/5" in err
    task.eval(progress=False)
    assert capsys.readouterr().err == ""


def test_progress_bar_renders_failures_retries_tokens_and_eta():
    """The bar line shows failures, retries, tokens, cost, rate and ETA."""
    from vitals_engine.progress import Progress, ProgressBar

    line = ProgressBar("t", stream=io.StringIO()).render(
        Progress(done=50, total=200, failed=2, retries=7, tokens=12_345, cost=0.5, elapsed=10.0)
    )
    assert "50/200" in line
    assert "failed 2" in line
    assert "retries 7" in line
    assert "tokens 12.3k" in line
    assert "$0.50" in line
    assert "5.0/s" in line
    assert "ETA 0:30" in line
    assert "batches" not in line


def test_progress_bar_shows_batches_out_waiting_done_and_queued():
    from vitals_engine.progress import Progress, ProgressBar

    progress = Progress(
        done=0,
        total=20_000,
        failed=0,
        retries=0,
        tokens=0,
        cost=None,
        elapsed=60.0,
        batch_queued=40,
        batch_submitted=2,
        batch_waiting=12_000,
        batch_done=1,
    )
    line = ProgressBar("t", stream=io.StringIO()).render(progress)
    assert "batches: 2 out (12.0k waiting), 1 done, 40 queued" in line


async def test_endpoint_pause_with_a_virtual_clock():
    """A 429 seen by one call pauses the others on the same rpm-limited endpoint."""
    clock = VirtualClock()
    registry = LimitsRegistry(RateLimits(rpm=6000), concurrency=4, clock=clock)
    calls = []

    def reply(prompt):
        calls.append((prompt, clock.now()))
        if len(calls) == 1:
            raise ve.RateLimitError("slow down", retry_after=10)
        return "ok"

    chat = ve.chat_mock(reply)

    async def one(prompt):
        with helpers.stage_scope(limits=registry, clock=clock):
            await chat.clone().chat_async(prompt)

    async with anyio.create_task_group() as tg:
        tg.start_soon(clock.drive)
        async with anyio.create_task_group() as inner:
            inner.start_soon(one, "a")
            await anyio.wait_all_tasks_blocked()
            inner.start_soon(one, "b")
        tg.cancel_scope.cancel()
    assert calls[0] == ("a", 0.0)
    assert all(when >= 10 for _, when in calls[1:])
    assert sorted(p for p, _ in calls[1:]) == ["a", "b"]


async def test_sample_timeout_applies_to_a_blocked_sync_solver(tmp_path):
    """A synchronous solver that blocks past sample_timeout is recorded as timed out and
    the run stops waiting for it; the other samples finish."""
    released = threading.Event()

    def solver(input: str) -> str:
        if input.startswith("What's 0+0"):
            released.wait(60)  # blocks far past the sample_timeout, until the test ends
        return input

    task = ve.Task(sums(3), solver=solver, scorer=ve.detect_includes(), dir=tmp_path)
    try:
        with anyio.fail_after(30):
            await task.eval_async(
                max_concurrency=3, fail_on_error=1, retry=ve.Retry(sample_timeout=0.3)
            )
    finally:
        released.set()
    errors = task.get_samples()["error"].to_list()
    assert errors[0] == (
        "SampleTimeout while solving: the sample took longer than its sample_timeout of 0.3s"
    )
    assert errors[1:] == [None, None]
