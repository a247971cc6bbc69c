"""A worker's side of cluster-wide limits: endpoint limiters whose capacity is leased.

On a Ray worker, the run's `LimitsRegistry` is a `SharedLimitsRegistry`: each
endpoint's limiter is a `SharedLimiter`, whose concurrency slots (`LeasedSlots`)
and rpm/tpm buckets (`LeasedBucket`) are leased from the endpoint's coordinator
(`coordinator.py`). The engine uses them as it uses a local limiter: the hot
path (a free slot, leased requests left) makes no remote call.

- The first use of an endpoint joins its coordinator, which grants the
  worker's share of slots at once.
- A request with no free slot asks for more (`grow`), once for a given demand;
  what the coordinator cannot grant now it pushes later (`adjust`).
- Slots the coordinator asks back (`shed`) are given back idle ones first,
  busy ones as their requests finish.
- A 429 that means a rate limit pauses the endpoint here at once and is
  reported; the coordinator pauses it on every other worker.
"""

from __future__ import annotations

import math
from typing import Any

import anyio

from ..pacing.clock import Clock
from ..pacing.limits import EndpointLimiter, LimitsRegistry, RateLimits, Slots, TokenBucket
from .coordinator import LEASE_TTL, Endpoint

__all__ = [
    "CoordinatorLink",
    "LeasedBucket",
    "LeasedSlots",
    "SharedLimiter",
    "SharedLimitsRegistry",
]

#: Seconds after which a starved worker asks again for a demand it asked for already
#: (a safety net: the coordinator pushes what it grants later).
ASK_AGAIN = 1.0

#: Seconds a call to a coordinator may take before the worker gives up on it.
CALL_TIMEOUT = 60.0


async def _answer(ref: Any) -> Any:
    """The result of a call to a coordinator. Shielded: a grant must not be lost to a
    cancelled sample, or its slots would stay counted as held."""
    with anyio.fail_after(CALL_TIMEOUT, shield=True):
        return await ref


class CoordinatorLink:
    """One worker's line to one endpoint's coordinator, in the run's hub (joined on
    first use)."""

    def __init__(self, hub: Any, worker: int, me: Any, endpoint: Endpoint) -> None:
        self.hub = hub
        self.worker = worker
        self.me = me
        self.endpoint = endpoint
        self.joined = False
        #: Clean successes not reported yet (they raise an adaptive total).
        self.successes = 0
        self._joining: anyio.Event | None = None

    async def join(self, limiter: SharedLimiter) -> None:
        """Join the coordinator once; the slots it grants go to `limiter`."""
        if self._joining is not None:
            await self._joining.wait()
            return
        self._joining = anyio.Event()
        try:
            call = self.hub.join.remote(self.endpoint, self.worker, self.me, limiter.limits)
            granted, pause = await _answer(call)
            self.joined = True
            limiter.pause(pause)
            limiter.slots.resize(limiter.slots.size + granted)
        finally:
            self._joining.set()
            if not self.joined:
                self._joining = None  # the next caller tries again

    def configure(self, limits: RateLimits) -> None:
        if self.joined:
            self.hub.configure.remote(self.endpoint, limits)

    def _successes(self) -> int:
        count, self.successes = self.successes, 0
        return count

    async def grow(self, demand: int) -> tuple[int, float]:
        call = self.hub.grow.remote(self.endpoint, self.worker, demand, self._successes())
        return await _answer(call)

    def give_back(self, count: int) -> None:
        self.hub.give_back.remote(self.endpoint, self.worker, count, self._successes())

    async def take(self, kind: str, need: float, want: float) -> tuple[float, float]:
        return await _answer(self.hub.take.remote(self.endpoint, kind, need, want))

    def rate_limited(self, retry_after: float | None) -> None:
        if self.joined:
            self.hub.rate_limited.remote(self.endpoint, self.worker, retry_after)


class LeasedSlots(Slots):
    """Concurrency slots leased from the coordinator: `size` is what this worker holds."""

    def __init__(self, limiter: SharedLimiter) -> None:
        super().__init__(0)
        self.limiter = limiter
        #: Slots the coordinator asked back that are still in use here.
        self.owed = 0
        self._growing = False
        self._asked = 0
        self._asked_at = -math.inf

    async def acquire(self) -> None:
        if self.taken < self.size and not self._waiting:
            self.taken += 1
            return
        if not self._growing:
            await self._grow()
        await super().acquire()

    async def _grow(self) -> None:
        self._growing = True
        try:
            await self._ask_more()
        finally:
            self._growing = False

    async def _ask_more(self) -> None:
        link = self.limiter.link
        if not link.joined:
            await link.join(self.limiter)
            if self.free > 0:
                return
        demand = self.taken + len(self._waiting) + 1 + self.owed
        now = self.limiter.clock.now()
        if demand <= self._asked and now - self._asked_at < ASK_AGAIN:
            return  # asked already: what can be granted will be pushed
        want = demand + max(1, self.size // 4)
        self._asked, self._asked_at = want, now
        granted, pause = await link.grow(want)
        self.limiter.pause(pause)
        if granted:
            self.resize(self.size + granted)

    @property
    def free(self) -> int:
        return self.size - self.taken

    def release(self) -> None:
        self.taken -= 1
        if self.owed:
            self._settle()
        self._wake()

    def grant(self, count: int) -> None:
        """The coordinator granted `count` more slots."""
        self.resize(self.size + count)

    def shed(self, count: int, trim: bool = False) -> None:
        """The coordinator asks `count` slots back: idle ones now, busy ones when done;
        with `trim`, every idle slot now."""
        self.owed += count
        self._settle(trim)

    def _settle(self, trim: bool = False) -> None:
        idle = self.size - self.taken
        back = idle if trim else min(self.owed, idle)
        if back > 0:
            self.resize(self.size - back)
            self.owed = max(0, self.owed - back)
            self._asked = 0  # asks from before no longer stand: ask anew when short
            self.limiter.link.give_back(back)


class LeasedBucket(TokenBucket):
    """Requests or tokens per minute leased from the coordinator's cluster bucket.

    What a waiting request needs (and what the requests queued behind it need) is
    leased in one call; leased amounts unused `LEASE_TTL` after the ask lapse, so a
    worker cannot save up a burst (a lease that arrives later still lets the request
    that asked for it go). Charges after the fact (`give` with a negative amount)
    are debt that the next lease pays first.
    """

    def __init__(self, limiter: SharedLimiter, kind: str) -> None:
        super().__init__(1.0, 1.0, limiter.clock)
        self.limiter = limiter
        self.kind = kind
        self.level = 0.0
        self.expires = -math.inf

    async def take(self, amount: float) -> None:
        clock = self.limiter.clock
        link = self.limiter.link
        async with self._lock:
            if not link.joined:
                await link.join(self.limiter)
            while True:
                now = clock.now()
                if now >= self.expires and self.level > 0:
                    self.level = 0.0
                if self.level >= amount - 1e-9:
                    self.level -= amount
                    return
                need = amount - self.level
                queued = self._lock.statistics().tasks_waiting
                granted, wait = await link.take(self.kind, need, need + amount * queued)
                if granted and clock.now() >= now + LEASE_TTL:
                    self.level = 0.0  # came too late to keep: this request goes, no more
                    return
                if granted:
                    self.level += granted
                    self.expires = now + LEASE_TTL
                else:
                    await clock.sleep(wait)

    def give(self, amount: float) -> None:
        self.level += amount

    def set_rate(self, rate: float, capacity: float) -> None:
        """The rate is the coordinator's: nothing to set here."""


class SharedLimiter(EndpointLimiter):
    """An endpoint limiter whose capacity is leased from the endpoint's coordinator."""

    def __init__(self, link: CoordinatorLink, limits: RateLimits, concurrency: int, clock: Clock):
        self.link = link
        super().__init__(limits, concurrency, clock)

    def configure(self, limits: RateLimits) -> None:
        self.limits = limits
        self.adaptive = limits.adaptive is not False
        self.max_concurrency = limits.max_concurrency or self.default_concurrency
        if not isinstance(self.slots, LeasedSlots):
            self.slots = LeasedSlots(self)
        if limits.rpm and self.requests is None:
            self.requests = LeasedBucket(self, "requests")
        if limits.tpm and self.tokens is None:
            self.tokens = LeasedBucket(self, "tokens")
        self.link.configure(limits)

    def pause(self, seconds: float) -> None:
        """Pause the endpoint here for `seconds` (0: no pause)."""
        if seconds > 0:
            self.paused_until = max(self.paused_until, self.clock.now() + seconds)

    def adjust(self, grant: int, shed: int, pause_for: float, trim: bool = False) -> None:
        """Apply what the coordinator pushed: slots granted or asked back, a pause."""
        self.pause(pause_for)
        slots = self.slots
        assert isinstance(slots, LeasedSlots)
        if grant:
            slots.grant(grant)
        if shed or trim:
            slots.shed(shed, trim)

    def on_rate_limited(self, retry_after: float | None) -> None:
        self._recent.append(True)
        if self.requests is None and self.tokens is None and not self.storming:
            return
        self.pause(retry_after if retry_after is not None else 1.0)
        self.link.rate_limited(retry_after)

    def on_success(self) -> None:
        self._recent.append(False)
        self.link.successes += 1


class SharedLimitsRegistry(LimitsRegistry):
    """A worker's endpoint limiters, each leasing from its endpoint's coordinator."""

    def __init__(
        self,
        hub: Any,
        worker: int,
        me: Any,
        defaults: RateLimits | None,
        concurrency: int,
        clock: Clock | None = None,
    ) -> None:
        super().__init__(defaults, concurrency, clock)
        self.hub = hub
        self.worker = worker
        self.me = me

    def new_limiter(self, endpoint: Endpoint) -> EndpointLimiter:
        link = CoordinatorLink(self.hub, self.worker, self.me, endpoint)
        return SharedLimiter(link, self.defaults, self.concurrency, self.clock)

    def adjust(
        self,
        worker: int,
        endpoint: Endpoint,
        grant: int,
        shed: int,
        pause_for: float,
        trim: bool = False,
    ) -> None:
        """A push from `endpoint`'s coordinator to `worker` (see `SharedLimiter.adjust`);
        one meant for this worker's id in an earlier run is left alone."""
        if worker != self.worker:
            return
        limiter = self._limiters.get(endpoint)
        if isinstance(limiter, SharedLimiter):
            limiter.adjust(grant, shed, pause_for, trim)
