"""How one model call behaves under its endpoint's limits: pauses, slots, token charges,
timeouts, whose retry policy applies, logging and cancellation."""

from __future__ import annotations

import json
import logging
from contextlib import nullcontext
from pathlib import Path

import anyio
import pytest

import vitals_engine as ve
from tests.helpers import openai, stage_scope, sums, until
from tests.inspect_check import assert_inspect_reads
from vitals_engine.chats.dispatch import call_model
from vitals_engine.chats.layers.call import guess_tokens
from vitals_engine.pacing.limits import LimitsRegistry, RateLimits
from vitals_engine.providers.base import Provider
from vitals_engine.testing.clock import VirtualClock
from vitals_engine.vocab.model_calls import ChatRequest
from vitals_engine.vocab.turns import TokenUsage, Turn

pytestmark = pytest.mark.anyio


class Scripted(Provider):
    """Answers each call with the next outcome: a Turn to return or an exception to raise."""

    name = "Scripted"

    def __init__(self, *outcomes: Turn | BaseException) -> None:
        super().__init__("scripted", base_url="scripted://")
        self.outcomes = list(outcomes)

    async def generate(self, request: ChatRequest) -> Turn:
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


def reply(tokens: TokenUsage | None) -> Turn:
    return Turn("assistant", Turn.user("ok").contents, tokens=tokens)


async def two_callers_on_one_slot(server, limits: RateLimits) -> None:
    """Call A, then (once A's request is in flight on the endpoint's only slot) call B, both
    to completion."""
    server.latency = 0.2  # A's answer comes long after B has queued for the slot
    registry = LimitsRegistry(limits, concurrency=4)
    chat = openai(server)
    limiter = registry.get(chat.provider.endpoint, None)

    async def one(prompt):
        with stage_scope(limits=registry):
            await chat.clone().chat_async(prompt)

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(one, "A")
            await until(lambda: limiter.in_flight == 1)
            tg.start_soon(one, "B")
            await until(lambda: limiter.slots.waiting == 1)
            assert (limiter.in_flight, limiter.slots.waiting) == (1, 1)


async def test_a_caller_queued_for_a_slot_waits_out_a_pause(server):
    """A caller already queued for the slot when a 429 pauses the endpoint is not sent
    before the Retry-After has passed."""
    server.fail("429", retry_after=0.3)
    await two_callers_on_one_slot(server, RateLimits(max_concurrency=1, rpm=6000))
    limited, *later = server.log
    assert (limited.request.prompt, limited.outcome) == ("A", "429")
    assert sorted(r.request.prompt for r in later) == ["A", "B"]
    assert all(r.at >= limited.answered + 0.3 for r in later)


async def test_waiting_for_a_retry_does_not_hold_a_connection_slot(server):
    """While A waits out its Retry-After, B (queued for the only slot) is sent and answered."""
    server.fail("429", retry_after=0.5)
    await two_callers_on_one_slot(server, RateLimits(max_concurrency=1))
    assert [(r.request.prompt, r.outcome) for r in server.log] == [
        ("A", "429"),
        ("B", "ok"),
        ("A", "ok"),
    ]
    assert server.log[1].answered < server.log[2].at


async def test_the_token_bucket_charges_a_call_its_real_usage():
    """Failed attempts get their estimate back; a success is charged its usage, or its
    estimate when the provider reported none."""
    clock = VirtualClock()
    request = ChatRequest([Turn.user("x" * 400)])
    limited = ve.RateLimitError("slow down", retry_after=0)
    cases = [
        (Scripted(limited, limited, reply(TokenUsage(input=100, output=20))), 120),
        (Scripted(limited, limited, limited), 0),
        (Scripted(reply(None)), guess_tokens(request).total),
    ]
    for provider, charged in cases:
        provider.retry = ve.Retry(max_attempts=3)
        registry = LimitsRegistry(RateLimits(tpm=600_000), clock=clock)
        raises = pytest.raises(ve.ProviderError) if charged == 0 else nullcontext()
        with stage_scope(limits=registry, clock=clock), anyio.fail_after(5), raises:
            await call_model(provider, request)
        bucket = registry.get(provider.endpoint, None).tokens
        assert bucket is not None
        assert bucket.level == 600_000 - charged
    assert clock.now() == 0  # no refill muddles the levels


async def test_a_real_call_takes_its_estimate_before_and_its_usage_after(server):
    """Against the mock server: while the request is answered the bucket holds the
    estimate; after, exactly the usage block's tokens."""
    clock = VirtualClock()
    registry = LimitsRegistry(RateLimits(tpm=600_000), clock=clock)
    chat = openai(server)
    bucket = registry.get(chat.provider.endpoint, None).tokens
    assert bucket is not None
    during = []
    server.script(lambda request: during.append(bucket.level))
    calls = []
    with stage_scope(limits=registry, clock=clock, calls=calls), anyio.fail_after(10):
        await chat.chat_async("What's 2+2?")
    (call,) = calls
    usage = call.reply.tokens.total
    assert usage > 0
    assert during == [600_000 - guess_tokens(call.request).total]
    assert bucket.level == 600_000 - usage != during[0]


async def test_a_timeout_without_an_attempt_timeout_says_so():
    """A TimeoutError escaping the transport (no Retry(timeout=)) is a ProviderTimeout
    with a readable message, not a formatting crash."""
    provider = Scripted(TimeoutError("read timed out"), TimeoutError())
    provider.retry = ve.Retry(max_attempts=1)
    request = ChatRequest([Turn.user("hi")])
    with pytest.raises(ve.ProviderTimeout, match="the request timed out: read timed out"):
        await call_model(provider, request)
    with pytest.raises(ve.ProviderTimeout, match=r"the request timed out$"):
        await call_model(provider, request)


async def test_a_models_sample_timeout_is_a_config_error(tmp_path):
    """Retry(sample_timeout=) belongs to the run; on a model it is an error, not ignored."""
    chat = ve.chat_mock(retry=ve.Retry(sample_timeout=5))
    task = ve.Task(sums(2), solver=ve.generate(chat), scorer=ve.detect_includes(), dir=tmp_path)
    with pytest.raises(ve.ConfigError, match=r"sample_timeout is a run setting.*eval\(retry="):
        await task.eval_async()


async def test_a_models_own_retry_wins_over_the_runs(server, tmp_path):
    """A model's retry= applies to its calls whatever the run's retry= says."""
    server.fail("503", times=1)
    chat = openai(server, retry=ve.Retry(max_attempts=1))
    task = ve.Task(sums(1), solver=ve.generate(chat), scorer=ve.detect_includes(), dir=tmp_path)
    await task.eval_async(retry=ve.Retry(max_attempts=5, backoff=0.01), fail_on_error=1)
    assert server.requests == 1
    assert task.get_samples()["error"].to_list()[0].startswith("ProviderUnavailable")

    server.reset()
    server.fail("503", times=1)
    chat = openai(server, retry=ve.Retry(max_attempts=2, backoff=0.01))
    task = ve.Task(sums(1), solver=ve.generate(chat), scorer=ve.detect_includes(), dir=tmp_path)
    await task.eval_async(retry=ve.Retry(max_attempts=1))
    assert server.requests == 2
    assert task.metrics == {"accuracy": 1.0}


async def test_retries_are_logged_and_logging_is_left_alone(server, tmp_path, caplog):
    """A 429 is logged on "vitals_engine" with model, attempt, reason and wait; the library
    adds no handler and leaves the root logger as it was."""
    caplog.set_level(logging.INFO, logger="vitals_engine")
    root = logging.getLogger()
    root_before = (root.level, list(root.handlers))
    server.fail("429", retry_after=0.05)
    task = ve.Task(
        sums(1), solver=ve.generate(openai(server)), scorer=ve.detect_includes(), dir=tmp_path
    )
    await task.eval_async()
    (line,) = [
        r.getMessage()
        for r in caplog.records
        if r.name == "vitals_engine" and "retrying model call" in r.getMessage()
    ]
    for part in ("model='openai/gpt-test'", "attempt=1", "reason='HTTP 429", "wait=0.05"):
        assert part in line
    own = logging.getLogger("vitals_engine").handlers
    assert all(type(h) is logging.NullHandler for h in own)
    assert (root.level, list(root.handlers)) == root_before


#: The page whose example of a logged retry's reason (`metadata.retries`) is checked.
LOGS_PAGE = Path(__file__).resolve().parents[1] / "docs" / "guide" / "logs.md"


def _text(path: Path) -> str:
    return path.read_text()


async def test_the_docs_show_a_retry_reason_as_logs_hold_it(server, tmp_path):
    """The example of a logged retry's reason in docs/guide/logs.md is what a 429 of the mock
    server with Retry-After 0.05 s leaves in the log's model event (`metadata.retries`)."""
    server.fail("429", retry_after=0.05)
    task = ve.Task(
        sums(1), solver=ve.generate(openai(server)), scorer=ve.detect_includes(), dir=tmp_path
    )
    await task.eval_async()
    log = json.loads(_text(task.log_path))
    (event,) = [e for e in log["samples"][0]["events"] if e["event"] == "model" and e["retries"]]
    (note,) = event["metadata"]["retries"]
    assert sorted(note) == ["at", "attempt", "reason", "wait"]
    page = " ".join(_text(LOGS_PAGE).split())
    assert f'`"{note["reason"]}"`' in page


async def test_a_run_cancelled_while_calls_wait_to_retry_logs_what_finished(server, tmp_path):
    """Cancelling the caller's scope once 3 samples are done, while the next call waits out a
    long Retry-After, stops the run at once; the log is "cancelled" with those 3 samples."""
    answered = 0

    def answer(request):
        nonlocal answered
        answered += 1
        if answered == 3:
            server.fail("429", times=None, retry_after=60)

    server.script(answer)
    scored = []
    three_done = anyio.Event()

    async def scorer(sample):
        scored.append(sample.id)
        if len(scored) == 3:
            three_done.set()
        return "C"

    task = ve.Task(sums(10), solver=ve.generate(openai(server)), scorer=scorer, dir=tmp_path)
    with anyio.fail_after(30):  # a run that missed the cancel would wait 60 s
        async with anyio.create_task_group() as tg:

            async def cancel_after_three():
                await three_done.wait()
                await anyio.wait_all_tasks_blocked()
                tg.cancel_scope.cancel()

            tg.start_soon(cancel_after_three)
            await task.eval_async(max_concurrency=1)
    assert scored == [1, 2, 3]
    full = assert_inspect_reads(task.log_path)
    assert full.status == "cancelled"
    assert sorted(s.id for s in full.samples if s.scores) == [1, 2, 3]


@pytest.mark.parametrize(
    ("kind", "header"),
    [
        ("503", "retry-after"),
        ("529", "retry-after"),
        ("500", "retry-after"),
        ("503", "retry-after-ms"),
    ],
)
async def test_any_retryable_answer_with_retry_after_is_retried_no_sooner(server, kind, header):
    """A 503, a 529 (overloaded) or a 500 that says Retry-After (or retry-after-ms) is retried
    no sooner than that, as a 429 is, however short the backoff."""
    server.fail(kind, retry_after=0.3, header=header)
    chat = openai(server, retry=ve.Retry(backoff=0.001, max_backoff=0.001))
    assert await chat.chat_async("What's 1+1?") == "1 + 1 = 2"
    failed, retried = server.log
    assert failed.outcome == kind
    assert retried.at >= failed.answered + 0.3


@pytest.mark.parametrize("attempts", [1, 3])
async def test_a_connection_dropped_after_the_request_went_out_is_the_retry_policys(
    server, attempts, tmp_path
):
    """A pooled connection that dies after the server received the request is never
    resent in secret: with one attempt the call fails after that one request; with more,
    the resend is a retry the engine counts and notes on the sample."""
    model = openai(server, retry=ve.Retry(max_attempts=attempts, backoff=0.001))

    async def twice(input: str) -> ve.Solution:
        chat = model.clone()
        await chat.chat_async(input)  # leaves a kept-alive connection in the run's pool
        server.fail("drop")  # the next request reaches the server, then its connection dies
        return ve.Solution(await chat.chat_async(input), chat=chat)

    task = ve.Task(
        dataset=sums(1), solver=twice, scorer=ve.detect_includes(), name="dropped", dir=tmp_path
    )
    await task.eval_async(fail_on_error=False)
    (record,) = task._state.records
    if attempts == 1:
        assert server.requests == 2
        assert record.error.type == "ProviderUnavailable"
        assert "after the request was sent" in record.error.message
    else:
        assert server.requests == 3
        assert record.error is None
        assert [note.attempt for note in record.retry_notes] == [1]
