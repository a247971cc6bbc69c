"""Endpoint limits and retry backoff, on a virtual clock: no real waiting."""

from __future__ import annotations

import random

import anyio
import pytest

import vitals_engine as ve
from vitals_engine.pacing.limits import EndpointLimiter, LimitsRegistry, RateLimits, TokenBucket
from vitals_engine.pacing.retry import Retry, backoff_delay
from vitals_engine.testing.clock import VirtualClock

pytestmark = pytest.mark.anyio


async def run_with_clock(clock, fn):
    async with anyio.create_task_group() as tg:
        tg.start_soon(clock.drive)
        result = await fn()
        tg.cancel_scope.cancel()
    return result


async def test_virtual_clock_jumps_to_the_next_wakeup():
    """Sleeping on the virtual clock returns at once with time moved by exactly that much."""
    clock = VirtualClock()

    async def work():
        await clock.sleep(30)
        await clock.sleep(0.5)
        return clock.now()

    assert await run_with_clock(clock, work) == 30.5


async def test_request_bucket_paces_requests_per_minute():
    """With rpm=60 the bucket lets one request through per second after the first."""
    clock = VirtualClock()
    bucket = TokenBucket(rate=1.0, capacity=1.0, clock=clock)
    times = []

    async def work():
        for _ in range(4):
            await bucket.take(1)
            times.append(clock.now())

    await run_with_clock(clock, work)
    assert times == [0.0, 1.0, 2.0, 3.0]


async def test_token_bucket_reconciles_estimates():
    """A token estimate that overshot is given back; an undershoot is charged as debt."""
    clock = VirtualClock()
    bucket = TokenBucket(rate=10.0, capacity=100.0, clock=clock)

    async def work():
        await bucket.take(80)
        bucket.give(80 - 30)  # the call used 30, not 80
        assert bucket.level == pytest.approx(70)
        bucket.give(-200)  # the call used far more than estimated
        await bucket.take(10)  # must wait for the debt (-130) to be paid back
        return clock.now()

    assert await run_with_clock(clock, work) == pytest.approx(14.0)


async def test_oversized_request_waits_for_a_full_bucket():
    """A request larger than the bucket waits for a full bucket instead of forever."""
    clock = VirtualClock()
    bucket = TokenBucket(rate=1.0, capacity=10.0, clock=clock)

    async def work():
        await bucket.take(10)
        await bucket.take(50)
        return clock.now()

    assert await run_with_clock(clock, work) == pytest.approx(10.0)


async def test_rate_limit_pauses_the_whole_endpoint_with_a_bucket():
    """With an rpm bucket, one 429 with Retry-After 5 holds every caller for 5 seconds."""
    clock = VirtualClock()
    limiter = EndpointLimiter(RateLimits(rpm=6000), default_concurrency=8, clock=clock)
    limiter.on_rate_limited(5.0)
    turns = []

    async def caller():
        await limiter.wait_turn()
        turns.append(clock.now())

    async def work():
        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(caller)

    await run_with_clock(clock, work)
    assert all(t >= 5.0 for t in turns)


async def test_a_stray_429_does_not_stall_the_endpoint():
    """Without a bucket, one 429 among successes leaves the endpoint open and its limit as is."""
    limiter = EndpointLimiter(RateLimits(max_concurrency=8), default_concurrency=8)
    for _ in range(19):
        limiter.on_success()
    limiter.on_rate_limited(5.0)
    assert limiter.paused_until == float("-inf")
    assert limiter.concurrency == 8


async def test_a_storm_of_429s_pauses_and_halves_once_per_window():
    """Frequent 429s pause the endpoint and halve its concurrency, at most once per window."""
    clock = VirtualClock()
    limiter = EndpointLimiter(RateLimits(max_concurrency=8), default_concurrency=8, clock=clock)
    for _ in range(10):
        limiter.on_rate_limited(2.0)
    assert limiter.storming
    assert limiter.paused_until == 2.0
    assert limiter.concurrency == 4
    clock.advance(2.0)
    limiter.on_rate_limited(2.0)
    assert limiter.concurrency == 2
    assert [reason for *_, reason in limiter.history] == ["rate_limit", "rate_limit"]


async def test_concurrency_recovers_gradually_after_a_storm():
    """After a storm, clean successes raise the limit one step per limit's worth of them."""
    limiter = EndpointLimiter(RateLimits(max_concurrency=8, rpm=6000), default_concurrency=100)
    limiter.on_rate_limited(None)
    assert limiter.concurrency == 4
    for _ in range(4):
        limiter.on_success()
    assert limiter.concurrency == 5
    for _ in range(100):
        limiter.on_success()
    assert limiter.concurrency == 8
    assert limiter.history[-1][3] == "steady_state_up"


async def test_slots_bound_requests_in_flight():
    """No more requests are in flight than the endpoint's concurrency."""
    limiter = EndpointLimiter(RateLimits(max_concurrency=3), default_concurrency=100)
    peak = 0
    release = anyio.Event()

    async def request():
        nonlocal peak
        async with limiter.slot():
            peak = max(peak, limiter.in_flight)
            await release.wait()

    async with anyio.create_task_group() as tg:
        for _ in range(10):
            tg.start_soon(request)
        await anyio.wait_all_tasks_blocked()
        assert limiter.in_flight == 3
        release.set()
    assert peak == 3


async def test_lowered_concurrency_applies_to_new_requests():
    """After a 429 halves the limit, new requests wait until in-flight ones drop below it."""
    limiter = EndpointLimiter(RateLimits(max_concurrency=4, rpm=6000), default_concurrency=100)
    release = anyio.Event()
    peak_after = 0

    async def request(after_429: bool):
        nonlocal peak_after
        async with limiter.slot():
            if after_429:
                peak_after = max(peak_after, limiter.in_flight)
            await release.wait()

    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(request, False)
        await anyio.wait_all_tasks_blocked()
        limiter.on_rate_limited(None)
        for _ in range(4):
            tg.start_soon(request, True)
        await anyio.wait_all_tasks_blocked()
        assert limiter.in_flight == 4
        release.set()
    assert peak_after <= 4
    assert limiter.concurrency == 2


def test_limits_merge_model_over_run_defaults():
    """A model's own limits win; what it leaves unset comes from the run's defaults."""
    registry = LimitsRegistry(RateLimits(rpm=100, tpm=10_000), concurrency=50)
    limiter = registry.get(("OpenAI", "u", "m"), RateLimits(rpm=10))
    assert (limiter.limits.rpm, limiter.limits.tpm) == (10, 10_000)
    assert limiter.max_concurrency == 50
    assert registry.get(("OpenAI", "u", "m"), None) is limiter


def test_a_models_limits_take_the_runs_adaptive_setting_unless_they_set_their_own():
    """adaptive is merged field by field like the numbers: unset on the model, the run's."""
    registry = LimitsRegistry(RateLimits(adaptive=False, rpm=6000), concurrency=8)
    inherited = registry.get(("OpenAI", "u", "a"), RateLimits(max_concurrency=4))
    own = registry.get(("OpenAI", "u", "b"), RateLimits(max_concurrency=4, adaptive=True))
    for limiter in (inherited, own):
        limiter.on_rate_limited(1.0)
    assert (inherited.adaptive, inherited.concurrency) == (False, 4)
    assert (own.adaptive, own.concurrency) == (True, 2)
    assert LimitsRegistry().get(("OpenAI", "u", "c"), RateLimits(rpm=60)).adaptive


def test_chats_sharing_an_endpoint_get_the_stricter_of_each_limit():
    """Two chats with their own limits on one endpoint: the lowest of each number, adaptive
    if either asks; what neither sets comes from the run; whichever calls first."""
    endpoint = ("OpenAI", "u", "m")
    lax = RateLimits(max_concurrency=40, rpm=600, adaptive=False)
    strict = RateLimits(max_concurrency=10, rpm=6000, tpm=50_000, adaptive=True)
    for first, second in ((lax, strict), (strict, lax)):
        registry = LimitsRegistry(RateLimits(tpm=1_000, rpm=1), concurrency=100)
        one = registry.get(endpoint, first)
        assert registry.get(endpoint, second) is one
        assert registry.get(endpoint, None) is one
        assert one.limits == RateLimits(max_concurrency=10, rpm=600, tpm=50_000, adaptive=True)
        assert (one.max_concurrency, one.concurrency) == (10, 10)
        assert (one.requests and one.requests.rate, one.tokens and one.tokens.capacity) == (
            10,
            50_000,
        )


def test_stricter_limits_arriving_later_keep_what_the_endpoint_learnt():
    """A chat with limits that calls after the endpoint was rate limited lowers the maximum
    but keeps the halved concurrency and the pause."""
    clock = VirtualClock()
    registry = LimitsRegistry(RateLimits(rpm=6000), concurrency=32, clock=clock)
    limiter = registry.get(("OpenAI", "u", "m"), None)
    limiter.on_rate_limited(5.0)
    assert limiter.concurrency == 16
    registry.get(("OpenAI", "u", "m"), RateLimits(max_concurrency=24, tpm=600))
    assert (limiter.max_concurrency, limiter.concurrency) == (24, 16)
    assert limiter.paused_until == 5.0
    assert limiter.tokens is not None
    registry.get(("OpenAI", "u", "m"), RateLimits(max_concurrency=8))
    assert (limiter.max_concurrency, limiter.concurrency) == (8, 8)


async def test_a_request_queued_for_a_slot_when_a_pause_starts_waits_it_out():
    """A caller already waiting for a slot when a 429 pauses the endpoint gets one only
    after the pause."""
    clock = VirtualClock()
    limiter = EndpointLimiter(RateLimits(max_concurrency=1, rpm=6000), 8, clock=clock)
    got = []

    async def queued():
        await limiter.wait_turn()
        async with limiter.slot():
            got.append(clock.now())

    async def work():
        async with anyio.create_task_group() as tg, limiter.slot():
            tg.start_soon(queued)
            await anyio.wait_all_tasks_blocked()
            assert limiter.slots.waiting == 1
            limiter.on_rate_limited(5.0)

    await run_with_clock(clock, work)
    assert got == [5.0]


def test_bad_limits_and_retry_are_config_errors():
    """Non-positive limits or attempts are rejected with the field named."""
    with pytest.raises(ve.ConfigError, match="rpm"):
        RateLimits(rpm=0)
    with pytest.raises(ve.ConfigError, match="max_attempts"):
        Retry(max_attempts=0)
    with pytest.raises(ve.ConfigError, match="timeout"):
        Retry(timeout=-1)


def test_backoff_honours_retry_after_and_grows_exponentially():
    """Backoff waits at least Retry-After when given; otherwise doubles, with jitter, capped."""
    rng = random.Random(1)
    policy = Retry(backoff=1.0, max_backoff=8.0)
    limited = ve.RateLimitError("slow", retry_after=3.0)
    for attempt in range(1, 5):
        assert 3.0 <= backoff_delay(attempt, limited, policy, rng) <= 3.3
    other = ve.ProviderUnavailable("boom")
    waits = [backoff_delay(a, other, policy, rng) for a in range(1, 7)]
    for attempt, wait in enumerate(waits, 1):
        cap = min(8.0, 2 ** (attempt - 1))
        assert cap / 2 <= wait <= cap


async def test_a_cancelled_waiter_passes_its_slot_on():
    """A caller cancelled while waiting for a slot does not leak it: the next waiter gets it."""
    from vitals_engine.pacing.limits import Slots

    slots = Slots(1)
    await slots.acquire()
    got = []
    scopes = []

    async def first():
        with anyio.CancelScope() as scope:
            scopes.append(scope)
            await slots.acquire()
            got.append("first")

    async def second():
        await slots.acquire()
        got.append("second")
        slots.release()

    async with anyio.create_task_group() as tg:
        tg.start_soon(first)
        await anyio.wait_all_tasks_blocked()
        tg.start_soon(second)
        await anyio.wait_all_tasks_blocked()
        scopes[0].cancel()
        await anyio.wait_all_tasks_blocked()
        slots.release()
    assert got == ["second"]
    assert slots.taken == 0
