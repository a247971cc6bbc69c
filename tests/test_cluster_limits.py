"""One set of limits per endpoint across workers: the coordinator and the workers' leased
limiters, in one process.

Ray's part (actor calls and pushes) is played by small stand-ins that call the
coordinator and the workers' registries directly, so the leasing protocol is
tested on both event loops with a virtual clock, without a cluster. The same
classes run on Ray in tests/test_ray.py.
"""

import math

import anyio
import pytest

from vitals_engine import RateLimits
from vitals_engine.distributed.coordinator import LEASE_TTL, EndpointCoordinator, LimitsHub
from vitals_engine.distributed.leases import SharedLimitsRegistry
from vitals_engine.testing.clock import VirtualClock

pytestmark = pytest.mark.anyio

ENDPOINT = ("openai", "http://127.0.0.1:1/v1", "gpt-test")


class Ref:
    """A call's result, awaitable as a Ray ObjectRef is."""

    def __init__(self, value):
        self.value = value

    def __await__(self):
        if False:  # a generator that returns at once
            yield
        return self.value


class Method:
    def __init__(self, fn):
        self.fn = fn

    def remote(self, *args):
        return Ref(self.fn(*args))


class Actor:
    """Stands in for a Ray actor handle: `actor.method.remote(...)` runs the method now."""

    def __init__(self, target):
        self.target = target

    def __getattr__(self, name):
        return Method(getattr(self.target, name))


class WorkerHandle:
    """What the coordinator pushes to: the worker's `adjust`, on its registry."""

    def __init__(self):
        self.registry = None

    def adjust(self, *args):
        self.registry.adjust(*args)


def cluster(limits, workers, clock, concurrency=100):
    """The endpoint's coordinator and `workers` registries leasing from it through the
    run's hub (the workers' limiters of the endpoint)."""
    coordinator = EndpointCoordinator(
        ENDPOINT, limits, concurrency, workers=workers, clock=clock.now
    )
    limits_hub = LimitsHub(concurrency, workers)
    limits_hub.coordinators[ENDPOINT] = coordinator
    hub = Actor(limits_hub)
    limiters = []
    for index in range(workers):
        handle = WorkerHandle()
        registry = SharedLimitsRegistry(hub, index, Actor(handle), limits, concurrency, clock)
        handle.registry = registry
        limiters.append(registry.get(ENDPOINT, None))
    return coordinator, limiters


async def turns_taken(clock, limiters, *, each, senders=1):
    """Each limiter's worker has `senders` tasks, each sending `each` requests as fast as
    its limiter lets it: when each request's turn came, in order (virtual time)."""
    started = []

    async def sender(limiter):
        for _ in range(each):
            await limiter.wait_turn()
            started.append(clock.now())

    async with anyio.create_task_group() as tg:
        tg.start_soon(clock.drive)
        async with anyio.create_task_group() as work:
            for limiter in limiters:
                for _ in range(senders):
                    work.start_soon(sender, limiter)
        tg.cancel_scope.cancel()
    return sorted(started)


def assert_within_a_burst_plus_the_rate(started, burst, rate):
    """The requests started in every span of time are at most `burst` plus `rate` per
    second of the span."""
    for i, first in enumerate(started):
        for j in range(i, len(started)):
            assert j - i + 1 <= burst + rate * (started[j] - first) + 1e-9, (i, j, started)


async def test_max_concurrency_holds_across_workers_and_every_request_runs():
    """Three workers, 12 requests each, an endpoint limited to 5 at once: never more than
    5 in flight over all workers, and every request gets a slot (no worker starves while
    another holds idle slots)."""
    clock = VirtualClock()
    coordinator, limiters = cluster(RateLimits(max_concurrency=5), 3, clock)
    in_flight = peak = done = 0

    async def request(limiter, seconds):
        nonlocal in_flight, peak, done
        async with limiter.slot():
            in_flight += 1
            peak = max(peak, in_flight)
            await clock.sleep(seconds)
            in_flight -= 1
        done += 1

    async with anyio.create_task_group() as tg:
        tg.start_soon(clock.drive)
        async with anyio.create_task_group() as work:
            for index, limiter in enumerate(limiters):
                for i in range(12):
                    work.start_soon(request, limiter, 0.1 + 0.05 * ((i + index) % 4))
        tg.cancel_scope.cancel()
    assert done == 36
    assert peak == 5
    assert sum(coordinator.held.values()) <= 5


async def test_a_worker_busier_than_the_others_gets_their_idle_slots():
    """Worker 0 has all the work; worker 1 joined and holds its share idle. Worker 0 is
    given worker 1's idle slots and runs up to the whole endpoint's limit."""
    clock = VirtualClock()
    coordinator, (busy, idle) = cluster(RateLimits(max_concurrency=8), 2, clock)
    await idle.acquire_slot()  # worker 1 joins (4 slots) and finishes its one request
    idle.slots.release()
    assert coordinator.held == {0: 0, 1: 4} or coordinator.held == {1: 4}
    in_flight = peak = 0

    async def request():
        nonlocal in_flight, peak
        async with busy.slot():
            in_flight += 1
            peak = max(peak, in_flight)
            await clock.sleep(1)
            in_flight -= 1

    async with anyio.create_task_group() as tg:
        tg.start_soon(clock.drive)
        async with anyio.create_task_group() as work:
            for _ in range(20):
                work.start_soon(request)
        tg.cancel_scope.cancel()
    assert peak == 8
    assert coordinator.held[1] == 0


async def test_a_rate_limit_on_one_worker_pauses_the_endpoint_on_every_worker():
    """Worker 0 gets a 429 with Retry-After 3 s (an rpm is set, so it is a rate limit): the
    endpoint pauses on worker 0 and, pushed by the coordinator, on workers 1 and 2 until
    the 3 s have passed; the endpoint's concurrency is halved for the cluster once."""
    clock = VirtualClock(start=100.0)
    coordinator, limiters = cluster(RateLimits(rpm=600, max_concurrency=8), 3, clock)
    for limiter in limiters:
        await limiter.acquire_slot()
    limiters[0].on_rate_limited(3.0)
    assert [limiter.paused_until for limiter in limiters] == [103.0] * 3
    assert coordinator.total == 4
    limiters[1].on_rate_limited(3.0)  # the same storm, seen by another worker
    assert coordinator.total == 4
    assert [(old, new, why) for _, old, new, why in coordinator.history] == [(8, 4, "rate_limit")]

    started = await turns_taken(clock, limiters, each=1)
    assert min(started) >= 103.0


async def test_a_halved_limit_is_given_back_by_busy_workers_as_their_requests_finish():
    """Two workers hold 4 slots each, all in use, when a 429 halves the endpoint to 4: no
    slot is taken away mid-request, and no new request starts until the held slots are
    back under 4 in all."""
    clock = VirtualClock()
    coordinator, limiters = cluster(RateLimits(max_concurrency=8), 2, clock)
    for limiter in limiters:
        for _ in range(4):
            await limiter.acquire_slot()
    coordinator.rate_limited(0, 0.0)
    assert coordinator.total == 4
    assert sum(coordinator.held.values()) == 8  # in use: not free until released
    for limiter in limiters:
        assert limiter.slots.size == 4
        limiter.slots.release()
        limiter.slots.release()
    assert sum(coordinator.held.values()) == 4
    assert [limiter.slots.size for limiter in limiters] == [2, 2]
    assert coordinator.free == 0


async def test_clean_successes_raise_a_halved_limit_back():
    """After a halving, successes reported by the workers raise the total by one per
    `total` of them, up to the configured maximum."""
    clock = VirtualClock()
    coordinator, limiters = cluster(RateLimits(max_concurrency=8), 2, clock)
    await limiters[0].acquire_slot()
    coordinator.rate_limited(0, 0.0)
    assert coordinator.total == 4
    coordinator.give_back(0, 0, successes=4 + 5 + 6 + 7 + 100)
    assert coordinator.total == 8
    assert [why for *_, why in coordinator.history] == ["rate_limit"] + ["steady_state_up"] * 4


async def test_the_request_rate_is_one_bucket_for_the_cluster():
    """rpm=600 over 3 workers, each sending as fast as it may: the requests started in
    every span of time are at most one second's burst plus the rate, as for one
    process, not three times that."""
    clock = VirtualClock()
    _, limiters = cluster(RateLimits(rpm=600), 3, clock)
    started = await turns_taken(clock, limiters, each=12)
    assert len(started) == 36
    assert_within_a_burst_plus_the_rate(started, burst=10, rate=10)
    assert started[-1] >= 2.6 - 1e-9  # 36 requests at 10/s after a burst of 10


class LateMethod:
    """A hub call whose answer is decided at once but reaches the worker `delay` seconds
    later, as on a starved machine."""

    def __init__(self, fn, clock, delay):
        self.fn, self.clock, self.delay = fn, clock, delay

    def remote(self, *args):
        async def answer():
            value = self.fn(*args)
            await self.clock.sleep(self.delay)
            return value

        return answer()


@pytest.mark.parametrize("delays", [(0.9, 0.1), (0.2, 0.1)])
async def test_leases_that_reach_workers_late_do_not_bunch_requests(delays):
    """rpm=600 over 2 workers, each with 30 requests waiting at once; each worker's
    leases reach it some time after the coordinator granted them (a starved machine),
    worker 0's later than worker 1's. The requests started in every span of time are
    still at most one second's burst plus the rate: a lease spent late does not add to
    the grants made since."""
    clock = VirtualClock()
    _, limiters = cluster(RateLimits(rpm=600), 2, clock)
    for limiter, delay in zip(limiters, delays, strict=True):
        link = limiter.link
        link.hub = Actor(link.hub.target)
        link.hub.take = LateMethod(link.hub.target.take, clock, delay)
    started = await turns_taken(clock, limiters, each=1, senders=30)
    assert len(started) == 60
    assert_within_a_burst_plus_the_rate(started, burst=10, rate=10)


async def test_tokens_leased_and_not_used_lapse():
    """A worker cannot save up leased requests: what it leased and left unused is gone
    after the lease's time, so a later burst asks the coordinator again."""
    clock = VirtualClock()
    coordinator, (limiter,) = cluster(RateLimits(rpm=600), 1, clock)
    await limiter.wait_turn()
    bucket = limiter.requests
    bucket.give(5)  # as if it had leased more than it used
    calls = coordinator.calls
    clock.advance(LEASE_TTL + 0.1)
    await limiter.wait_turn()
    assert coordinator.calls == calls + 1
    assert bucket.level < 5


async def test_a_dead_workers_slots_go_to_the_others():
    """A worker that dies holding slots: forgetting it frees them for a starved worker,
    pushed to it at once."""
    clock = VirtualClock()
    coordinator, (alive, dead) = cluster(RateLimits(max_concurrency=4), 2, clock)
    await dead.acquire_slot()
    await dead.acquire_slot()
    for _ in range(2):
        await alive.acquire_slot()
    got = anyio.Event()

    async def third():
        await alive.acquire_slot()
        got.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(third)
        await anyio.wait_all_tasks_blocked()
        assert not got.is_set()
        coordinator.forget(1)
        await got.wait()
    assert coordinator.held == {0: math.ceil(4 / 2) + 2}


async def test_a_kept_hub_starts_each_run_afresh_and_late_calls_change_nothing():
    """A hub kept for a second run: `begin` drops the first run's coordinators. A late
    give-back or grow from a first-run worker (its id unknown now) neither frees nor
    takes slots of the second run, and a push meant for another worker id leaves a
    worker's limiter alone."""
    clock = VirtualClock()
    limits_hub = LimitsHub(4, 2)
    hub = Actor(limits_hub)
    first = SharedLimitsRegistry(hub, 0, Actor(WorkerHandle()), RateLimits(max_concurrency=4), 4)
    await first.get(ENDPOINT, None).acquire_slot()
    limits_hub.begin(4, 1)
    assert limits_hub.coordinators == {}
    assert limits_hub.grow(ENDPOINT, 0, 3) == (0, 0.0)  # before anyone joined this run
    handle = WorkerHandle()
    second = SharedLimitsRegistry(hub, 7, Actor(handle), RateLimits(max_concurrency=4), 4, clock)
    handle.registry = second
    limiter = second.get(ENDPOINT, None)
    await limiter.acquire_slot()
    coordinator = limits_hub.coordinators[ENDPOINT]
    assert coordinator.held == {7: 4}
    limits_hub.give_back(ENDPOINT, 0, 2)
    assert limits_hub.grow(ENDPOINT, 0, 3) == (0, 0.0)
    assert coordinator.held == {7: 4}
    assert coordinator.wants == {}  # nobody is asked to give slots back for it
    size = limiter.slots.size
    second.adjust(0, ENDPOINT, 5, 0, 0.0)
    assert limiter.slots.size == size
    second.adjust(7, ENDPOINT, 1, 0, 0.0)
    assert limiter.slots.size == size + 1
