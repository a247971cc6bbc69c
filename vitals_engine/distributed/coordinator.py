"""One set of limits per endpoint across a Ray cluster: the coordinator that leases them.

Every worker of a distributed run keeps its own `EndpointLimiter` per endpoint,
but the capacity behind it is leased from one `EndpointCoordinator` per endpoint
(held by the run's `LimitsHub` actor), so the endpoint's max concurrency, rpm
and tpm hold across all workers together, and a 429 on one worker pauses the
endpoint on all of them.

Concurrency is leased in chunks, as counts of slots a worker may hold:
- a worker that joins gets its share at once (the total over the workers);
- a worker short of slots asks to `grow`; what cannot be given now is kept
  as a want, filled by a push (`grant`) as soon as slots come back;
- the coordinator asks workers to give slots back (`shed`) when the total is
  lowered (a 429 halves it, if adaptive) or when a starved worker's fair share
  is held by others; a worker gives back idle slots at once and busy ones as
  their requests finish, so slots in use never exceed the total; a starved
  worker also has the others give back their idle slots (`trim`);
- every change is relative (+n, -n), so messages in flight cannot make the
  coordinator and a worker disagree: a worker never holds more than the
  coordinator counts.

Requests and tokens per minute are cluster buckets: a worker short of them
asks for what its waiting requests need (`take`) and gets it, or the time to
wait. What a worker leased and did not use expires `LEASE_TTL` after it asked, and
each bucket holds back that much of its burst: a lease is spent at most that late,
so requests in any span of time stay within one process's burst plus the rate.

A 429 that a worker judges a rate limit (see `pacing/limits.py`) is reported
(`rate_limited`); the coordinator pauses the endpoint, halves the total if
adaptive (at most once per Retry-After window), and pushes the pause to every
worker. Clean successes, reported several at a time, raise the total by one per
`total` of them, up to the maximum, as a local limiter does.

This module imports no Ray: the driver makes the hub (every endpoint's
coordinator) a Ray actor, and pushes go through the workers' actor handles
(`handle.adjust.remote(...)`).
"""

from __future__ import annotations

import math
import time
from typing import Any

from ..pacing.limits import RateLimits

__all__ = ["LEASE_TTL", "EndpointCoordinator", "LimitsHub"]

#: Seconds that requests or tokens leased by a worker stay good, counted from the ask.
#: The cluster bucket's burst is this much of its rate smaller than one process's, so
#: a lease spent late cannot add to the grants made since.
LEASE_TTL = 0.25

#: Seconds between two asks to one worker to give back slots for a starved one.
REBALANCE_EVERY = 0.25

Endpoint = tuple[str, str, str]


class _Bucket:
    """A cluster token bucket, refilled at `rate` per second up to `capacity`."""

    __slots__ = ("capacity", "level", "rate", "updated")

    def __init__(self, per_minute: float, capacity: float, now: float) -> None:
        self.rate = per_minute / 60
        self.capacity = max(capacity, 1.0)
        self.level = self.capacity
        self.updated = now

    def retune(self, per_minute: float, capacity: float, now: float) -> None:
        self.refill(now)
        self.rate = per_minute / 60
        self.capacity = max(capacity, 1.0)
        self.level = min(self.level, self.capacity)

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.updated) * self.rate)
        self.updated = now

    def take(self, need: float, want: float, now: float) -> tuple[float, float]:
        """(granted, 0) when `need` is there (granting up to `want`), else (0, seconds to wait)."""
        self.refill(now)
        floor = min(need, self.capacity)  # more than a full bucket waits for a full one
        if self.level >= floor - 1e-9:  # float dust: never a wait too short to pass
            granted = max(need, min(want, self.level))
            self.level -= granted
            return granted, 0.0
        return 0.0, (floor - self.level) / self.rate


class EndpointCoordinator:
    """The cluster-wide limits of one endpoint, leased to the workers of a run.

    Args:
        endpoint: (provider, base URL, model); pushes to workers name it.
        limits: its limits (rpm, tpm, max concurrency, adaptive).
        concurrency: the total concurrency when `limits` sets none (the run's).
        workers: how many workers the run has (their first share).
        clock: monotonic seconds (tests pass their own).

    Example:
        >>> endpoint = ("openai", "https://api.openai.com/v1", "gpt-4.1")
        >>> coordinator = EndpointCoordinator(endpoint, RateLimits(rpm=600), 100, workers=2)
        >>> coordinator.join(0, handle)          # 50 slots for worker 0, no pause
        (50, 0.0)
    """

    def __init__(
        self,
        endpoint: Endpoint,
        limits: RateLimits,
        concurrency: int,
        *,
        workers: int = 1,
        clock: Any = time.monotonic,
    ) -> None:
        self.endpoint = endpoint
        self.default_concurrency = concurrency
        self.workers = max(1, workers)
        self.clock = clock
        self.handles: dict[int, Any] = {}
        self.held: dict[int, int] = {}
        self.owed: dict[int, int] = {}  # slots asked back and not yet given
        self.wants: dict[int, int] = {}  # what starved workers asked to hold in all
        self.asked: dict[int, float] = {}  # when each worker was last asked to give back
        self.requests: _Bucket | None = None
        self.tokens: _Bucket | None = None
        self.paused_until = -math.inf
        self.successes = 0
        self.next_decrease = -math.inf
        #: Changes of the total: (unix time, old, new, reason), as limiters keep them.
        self.history: list[tuple[float, int, int, str]] = []
        #: Calls made to the coordinator (for the benchmark: how chatty leasing is).
        self.calls = 0
        self.limits = limits
        self.max_total = self.total = limits.max_concurrency or concurrency
        self.adaptive = limits.adaptive is not False
        self._tune_buckets()

    # -- configuration -----------------------------------------------------------

    def _tune_buckets(self) -> None:
        now = self.clock()
        rpm, tpm = self.limits.rpm, self.limits.tpm
        self.requests = _retuned(self.requests, rpm, _burst(rpm, 1 / 60), now)
        self.tokens = _retuned(self.tokens, tpm, _burst(tpm, 1.0), now)

    def configure(self, limits: RateLimits) -> None:
        """A worker saw other limits for the endpoint: the stricter of each holds."""
        merged = self.limits.stricter(limits)
        if merged == self.limits:
            return
        self.limits = merged
        self.adaptive = merged.adaptive is not False
        self.max_total = merged.max_concurrency or self.default_concurrency
        if self.total > self.max_total:
            self._set_total(self.max_total, "configured")
        self._tune_buckets()

    # -- concurrency ---------------------------------------------------------------

    @property
    def free(self) -> int:
        return self.total - sum(self.held.values())

    def join(self, worker: int, handle: Any, limits: RateLimits | None = None) -> tuple[int, float]:
        """Register a worker (its handle takes pushes): (the slots it gets now, pause
        seconds left)."""
        self.calls += 1
        self.handles[worker] = handle
        if limits is not None:
            self.configure(limits)
        share = math.ceil(self.total / self.workers)
        granted = max(0, min(share, self.free))
        self.held[worker] = self.held.get(worker, 0) + granted
        return granted, self._pause_left()

    def grow(self, worker: int, demand: int, successes: int = 0) -> tuple[int, float]:
        """A worker would hold `demand` slots in all: (slots granted now, pause seconds left).

        What cannot be granted now is kept as a want and pushed when slots come back;
        workers holding more than their fair share are asked to give some back."""
        self.calls += 1
        if worker not in self.handles:  # a worker of an earlier run, late: it is gone
            return 0, self._pause_left()
        self._succeeded(successes)
        held = self.held.get(worker, 0)
        granted = max(0, min(demand - held, self.free))
        self.held[worker] = held + granted
        if held + granted < demand:
            self.wants[worker] = demand
            self._rebalance(worker)
        else:
            self.wants.pop(worker, None)
        return granted, self._pause_left()

    def give_back(self, worker: int, count: int, successes: int = 0) -> None:
        """A worker gives back `count` slots (idle ones, or asked for)."""
        self.calls += 1
        self._succeeded(successes)
        if worker in self.held:
            count = min(count, self.held[worker])
            self.held[worker] -= count
            owed = self.owed.get(worker, 0)
            if owed:
                self.owed[worker] = max(0, owed - count)
        self._hand_out()

    def forget(self, worker: int) -> None:
        """A worker is gone (dead): its slots and wants are free for the others."""
        self.held.pop(worker, None)
        self.owed.pop(worker, None)
        self.wants.pop(worker, None)
        self.handles.pop(worker, None)
        self._hand_out()

    def _fair_share(self) -> int:
        active = {w for w, n in self.held.items() if n > 0} | set(self.wants)
        return math.ceil(self.total / max(1, len(active)))

    def _hand_out(self) -> None:
        """Push free slots to the workers that want them: first up to each one's fair
        share (the least served first), then what is left, in the order they asked."""
        if not self.wants or self.free <= 0:
            return
        fair = self._fair_share()
        by_need = sorted(self.wants, key=lambda w: self.held.get(w, 0))
        for cap in (fair, None):
            for worker in by_need:
                free = self.free
                if free <= 0:
                    break
                held = self.held.get(worker, 0)
                want = self.wants.get(worker, 0)
                goal = want if cap is None else min(want, cap)
                granted = min(goal - held, free)
                if granted > 0:
                    self.held[worker] = held + granted
                    self._push(worker, grant=granted)
        for worker, want in list(self.wants.items()):
            if self.held.get(worker, 0) >= want:
                del self.wants[worker]

    def _rebalance(self, starved: int) -> None:
        """Ask the other workers for their idle slots, and those above their fair share for
        what is above it (each worker at most once per `REBALANCE_EVERY`)."""
        now = self.clock()
        fair = self._fair_share()
        for worker, held in self.held.items():
            if worker == starved or now - self.asked.get(worker, -math.inf) < REBALANCE_EVERY:
                continue
            self.asked[worker] = now
            over = max(0, held - self.owed.get(worker, 0) - fair)
            if over:
                self.owed[worker] = self.owed.get(worker, 0) + over
            self._push(worker, shed=over, trim=True)

    def _set_total(self, new: int, reason: str) -> None:
        old = self.total
        if new == old:
            return
        self.total = new
        self.history.append((time.time(), old, new, reason))
        excess = sum(self.held.values()) - new - sum(self.owed.values())
        if excess <= 0:
            return
        holding = sum(self.held.values()) or 1
        for worker, held in self.held.items():
            ask = min(held - self.owed.get(worker, 0), math.ceil(excess * held / holding))
            if ask > 0:
                self.owed[worker] = self.owed.get(worker, 0) + ask
                self._push(worker, shed=ask)

    def _succeeded(self, count: int) -> None:
        if not count or not self.adaptive or self.total >= self.max_total:
            return
        self.successes += count
        raised = False
        while self.successes >= self.total and self.total < self.max_total:
            self.successes -= self.total
            self._set_total(self.total + 1, "steady_state_up")
            raised = True
        if raised:
            self._hand_out()

    # -- rate limits ---------------------------------------------------------------

    def _pause_left(self) -> float:
        return max(0.0, self.paused_until - self.clock())

    def take(self, kind: str, need: float, want: float) -> tuple[float, float]:
        """Lease `need` (up to `want`) from the requests or tokens bucket: (granted, 0), or
        (0, seconds to wait) while the bucket is short or the endpoint paused."""
        self.calls += 1
        pause = self._pause_left()
        if pause > 0:
            return 0.0, pause
        bucket = self.requests if kind == "requests" else self.tokens
        if bucket is None:
            return want, 0.0
        return bucket.take(need, want, self.clock())

    def rate_limited(self, worker: int, retry_after: float | None) -> None:
        """A worker's request was rate limited: pause the endpoint everywhere until the
        Retry-After has passed, and halve the total if adaptive."""
        self.calls += 1
        now = self.clock()
        wait = retry_after if retry_after is not None else 1.0
        self.paused_until = max(self.paused_until, now + wait)
        if self.adaptive and now >= self.next_decrease:
            self.next_decrease = now + max(wait, 1.0)
            self._set_total(max(1, self.total // 2), "rate_limit")
        pause = self._pause_left()
        for other in self.handles:
            if other != worker:
                self._push(other, pause_for=pause)

    def _push(
        self,
        worker: int,
        *,
        grant: int = 0,
        shed: int = 0,
        pause_for: float = 0.0,
        trim: bool = False,
    ) -> None:
        handle = self.handles.get(worker)
        if handle is not None:
            handle.adjust.remote(worker, self.endpoint, grant, shed, pause_for, trim)

    def report(self) -> dict[str, Any]:
        """What the run's log and benchmark want to know of the endpoint."""
        return {"history": list(self.history), "calls": self.calls, "total": self.total}


def _burst(per_minute: float | None, minutes: float) -> float:
    """A cluster bucket's capacity: `minutes` of the rate (as one process's bucket has),
    less what leases in flight may still spend."""
    per_second = (per_minute or 0) / 60
    return per_second * (60 * minutes - LEASE_TTL)


def _retuned(
    bucket: _Bucket | None, per_minute: float | None, capacity: float, now: float
) -> _Bucket | None:
    if per_minute is None:
        return None
    if bucket is None:
        return _Bucket(per_minute, capacity, now)
    bucket.retune(per_minute, capacity, now)
    return bucket


class LimitsHub:
    """The run's coordinators, one per endpoint, in one Ray actor the driver owns.

    Workers call it with the endpoint first: `hub.grow.remote(endpoint, worker, demand)`.
    The endpoint's coordinator is made on the first worker's `join`, with the limits
    that worker sees. One actor serves every endpoint: leasing in chunks keeps calls
    few (a couple per thousand requests at scale), and a run pays for one more Ray
    process, not one per endpoint.

    A hub serves one run at a time and is kept for the next (`begin` starts afresh).
    Workers have ids unique over the hub's life, so a call from a worker of an earlier
    run that arrives late changes nothing: its endpoint or its worker is unknown.
    """

    def __init__(self, concurrency: int, workers: int) -> None:
        self.begin(concurrency, workers)

    def begin(self, concurrency: int, workers: int) -> None:
        """A new run: no coordinators yet, `workers` workers sharing `concurrency`."""
        self.concurrency = concurrency
        self.workers = workers
        self.coordinators: dict[Endpoint, EndpointCoordinator] = {}

    def join(
        self, endpoint: Endpoint, worker: int, handle: Any, limits: RateLimits
    ) -> tuple[int, float]:
        """See `EndpointCoordinator.join`; makes the endpoint's coordinator if need be."""
        coordinator = self.coordinators.get(endpoint)
        if coordinator is None:
            coordinator = EndpointCoordinator(
                endpoint, limits, self.concurrency, workers=self.workers
            )
            self.coordinators[endpoint] = coordinator
        return coordinator.join(worker, handle, limits)

    def configure(self, endpoint: Endpoint, limits: RateLimits) -> None:
        if endpoint in self.coordinators:
            self.coordinators[endpoint].configure(limits)

    def grow(
        self, endpoint: Endpoint, worker: int, demand: int, successes: int = 0
    ) -> tuple[int, float]:
        if endpoint not in self.coordinators:
            return 0, 0.0
        return self.coordinators[endpoint].grow(worker, demand, successes)

    def give_back(self, endpoint: Endpoint, worker: int, count: int, successes: int = 0) -> None:
        if endpoint in self.coordinators:
            self.coordinators[endpoint].give_back(worker, count, successes)

    def take(self, endpoint: Endpoint, kind: str, need: float, want: float) -> tuple[float, float]:
        if endpoint not in self.coordinators:  # a late call: ask again later
            return 0.0, LEASE_TTL
        return self.coordinators[endpoint].take(kind, need, want)

    def rate_limited(self, endpoint: Endpoint, worker: int, retry_after: float | None) -> None:
        if endpoint in self.coordinators:
            self.coordinators[endpoint].rate_limited(worker, retry_after)

    def forget(self, worker: int) -> None:
        """A worker died: every coordinator frees what it held."""
        for coordinator in self.coordinators.values():
            coordinator.forget(worker)

    def reports(self) -> dict[Endpoint, dict[str, Any]]:
        """Each endpoint's report (`EndpointCoordinator.report`)."""
        return {endpoint: c.report() for endpoint, c in self.coordinators.items()}
