"""Rate limits that belong to a model endpoint, shared by every call to it.

An endpoint is (provider, base URL, model). All calls to it in a run, from
solvers and judges alike, go through one `EndpointLimiter`:

1. a gate: when the endpoint is rate limited, the whole endpoint waits
   until the Retry-After has passed, not just the request that got it;
2. a requests-per-minute bucket and a tokens-per-minute bucket (tokens are
   estimated before the call and reconciled with the real usage after);
3. a concurrency limit, held only while a request is in flight (never while
   waiting to retry). It adapts: being rate limited halves it (at most once
   per Retry-After window), and each run of clean successes as long as the
   limit raises it by one, up to the maximum.

When is the endpoint "rate limited" rather than one request unlucky? When
it has a configured rpm/tpm bucket, any 429 means that rate is too high:
the bucket pauses at once. Without one, the endpoint pauses and backs off
when 429s are frequent: at least `STORM_SHARE` of its last `WINDOW`
answers. A stray 429 among successes only makes its own request wait out
the Retry-After (the retry loop does that), so a provider that sheds a few
requests does not stall the whole run.

Invariants: a request that got a 429 is not sent again before its
Retry-After; no request starts while the endpoint is paused (a request that
gets a slot during a pause gives it back and waits); the number in flight
never exceeds the current limit.

Whose limits: a model's own `Limits` win field by field over the run's;
when chats with different own limits share an endpoint, the stricter of
each applies (the lowest number; adaptive if any asks for it).
"""

from __future__ import annotations

import functools
import math
import time
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TypeVar

import anyio

from .._errors import ConfigError
from .clock import Clock, SystemClock

__all__ = ["EndpointLimiter", "Limits", "LimitsRegistry", "TokenBucket"]

#: Answers remembered per endpoint to tell a rate-limit storm from a stray 429.
WINDOW = 20
#: Share of 429s among them (with at least MIN_SEEN answers) that means a storm.
STORM_SHARE = 0.4
MIN_SEEN = 5

_N = TypeVar("_N", int, float)


@dataclass(frozen=True, slots=True)
class Limits:
    """How hard a model endpoint may be driven.

    Args:
        max_concurrency: requests in flight at once (default: the run's concurrency).
        rpm: requests per minute.
        tpm: tokens per minute (input + output).
        adaptive: lower concurrency on 429s and raise it back on success
            (None: the run's setting, else on).
        max_cost: the most this model may cost in one run, in dollars: the run starts
            no sample that could take the model's spending past it (see
            `eval(max_cost=)`); calls outside a run have no budget.

    Example:
        >>> chat_openai(model="gpt-4.1-mini", limits=Limits(max_concurrency=20, rpm=500))
        >>> task.eval(limits=Limits(rpm=60))      # the default for every model in the run
    """

    max_concurrency: int | None = None
    rpm: float | None = None
    tpm: float | None = None
    adaptive: bool | None = None
    max_cost: float | None = None

    def __post_init__(self) -> None:
        for name in ("max_concurrency", "rpm", "tpm", "max_cost"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not math.isfinite(value) or value <= 0
            ):
                raise ConfigError(
                    f"Limits({name}={value!r}) must be a positive finite number, "
                    "or None for no limit."
                )

    def over(self, defaults: Limits | None) -> Limits:
        """These limits, with what they leave unset taken from `defaults`."""
        if defaults is None:
            return self
        return Limits(
            self.max_concurrency or defaults.max_concurrency,
            self.rpm or defaults.rpm,
            self.tpm or defaults.tpm,
            defaults.adaptive if self.adaptive is None else self.adaptive,
            self.max_cost or defaults.max_cost,
        )

    def stricter(self, other: Limits) -> Limits:
        """The tighter of each limit of two chats sharing one endpoint (None: no limit)."""
        pair = (self.adaptive, other.adaptive)
        return Limits(
            _least(self.max_concurrency, other.max_concurrency),
            _least(self.rpm, other.rpm),
            _least(self.tpm, other.tpm),
            True if True in pair else False if False in pair else None,
            _least(self.max_cost, other.max_cost),
        )


def _least(a: _N | None, b: _N | None) -> _N | None:
    return b if a is None else a if b is None else min(a, b)


class TokenBucket:
    """A bucket refilled at `rate` per second up to `capacity`.

    `take(n)` waits until n are available (amounts above the capacity wait
    for a full bucket and leave it in debt). `give(n)` returns or, with a
    negative n, charges tokens after the fact. Waiters are served in order.
    """

    def __init__(self, rate: float, capacity: float, clock: Clock) -> None:
        self.rate = rate
        self.capacity = max(capacity, 1.0)
        self.level = self.capacity
        self._clock = clock
        self._updated = clock.now()
        self._lock = anyio.Lock()

    def _refill(self) -> None:
        now = self._clock.now()
        self.level = min(self.capacity, self.level + (now - self._updated) * self.rate)
        self._updated = now

    async def take(self, amount: float) -> None:
        async with self._lock:
            need = min(amount, self.capacity)
            while True:
                self._refill()
                if self.level >= need:
                    self.level -= amount
                    return
                await self._clock.sleep((need - self.level) / self.rate)

    def give(self, amount: float) -> None:
        self._refill()
        self.level = min(self.capacity, self.level + amount)

    def set_rate(self, rate: float, capacity: float) -> None:
        self._refill()
        self.rate = rate
        self.capacity = max(capacity, 1.0)
        self.level = min(self.level, self.capacity)


def _bucket(
    bucket: TokenBucket | None, per_minute: float | None, capacity: float, clock: Clock
) -> TokenBucket | None:
    if per_minute is None:
        return None
    if bucket is None:
        return TokenBucket(per_minute / 60, capacity, clock)
    bucket.set_rate(per_minute / 60, capacity)
    return bucket


class Slots:
    """A counting semaphore whose size can change while it is held.

    Taking a free slot costs no await (the hot path of every model call);
    when all are taken, callers wait in order. Lowering the size never
    interrupts holders: new callers wait until enough slots come back.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self.taken = 0
        self._waiting: deque[anyio.Event] = deque()

    async def acquire(self) -> None:
        if self.taken < self.size and not self._waiting:
            self.taken += 1
            return
        turn = anyio.Event()
        self._waiting.append(turn)
        try:
            await turn.wait()
        except BaseException:
            if turn in self._waiting:
                self._waiting.remove(turn)
            elif turn.is_set():
                self.release()  # we were handed a slot as we were cancelled: pass it on
            raise

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def release(self) -> None:
        self.taken -= 1
        self._wake()

    def resize(self, size: int) -> None:
        self.size = size
        self._wake()

    def _wake(self) -> None:
        while self._waiting and self.taken < self.size:
            self.taken += 1
            self._waiting.popleft().set()


class EndpointLimiter:
    """The limits of one endpoint: pause gate, buckets and adaptive concurrency."""

    def __init__(self, limits: Limits, default_concurrency: int, clock: Clock | None = None):
        self.clock = clock or SystemClock()
        self.default_concurrency = default_concurrency
        self.max_concurrency = limits.max_concurrency or default_concurrency
        self.slots = Slots(self.max_concurrency)
        self.requests: TokenBucket | None = None
        self.tokens: TokenBucket | None = None
        #: The models' own limits merged into these (see `LimitsRegistry.get`).
        self.model_limits: tuple[Limits, ...] = ()
        self._successes = 0
        self._recent: deque[bool] = deque(maxlen=WINDOW)  # True: a 429
        self._next_decrease = -math.inf
        self.paused_until = -math.inf
        #: Whether a warning said this run's calls to the endpoint are being retried.
        self.retries_announced = False
        self._gate = anyio.Lock()
        #: Concurrency changes: (unix time, old limit, new limit, reason), reasons as
        #: Inspect's logs name them ("rate_limit", "steady_state_up").
        self.history: list[tuple[float, int, int, str]] = []
        self.configure(limits)

    def configure(self, limits: Limits) -> None:
        """Apply `limits`, keeping what the endpoint has learnt (a lowered concurrency,
        bucket levels, a pause)."""
        old_max = self.max_concurrency
        self.limits = limits
        self.adaptive = limits.adaptive is not False
        self.max_concurrency = limits.max_concurrency or self.default_concurrency
        lowered = self.concurrency < old_max
        self.slots.resize(
            min(self.concurrency, self.max_concurrency) if lowered else self.max_concurrency
        )
        rpm, tpm = limits.rpm, limits.tpm
        self.requests = _bucket(self.requests, rpm, (rpm or 0) / 60, self.clock)
        self.tokens = _bucket(self.tokens, tpm, tpm or 0, self.clock)

    @property
    def concurrency(self) -> int:
        """The current concurrency limit."""
        return self.slots.size

    @property
    def in_flight(self) -> int:
        return self.slots.taken

    async def wait_unpaused(self) -> None:
        """Wait until the endpoint's pause (if any) has passed."""
        async with self._gate:
            while (wait := self.paused_until - self.clock.now()) > 0:
                await self.clock.sleep(wait)

    async def wait_turn(self, estimated_tokens: int = 0) -> None:
        """Wait until the endpoint is not paused and the buckets allow one more request."""
        if self.paused_until > self.clock.now():
            await self.wait_unpaused()
        if self.requests is not None:
            await self.requests.take(1)
        if self.tokens is not None and estimated_tokens:
            await self.tokens.take(estimated_tokens)

    async def acquire_slot(self) -> None:
        """Take a concurrent-request slot once the endpoint is not paused; a slot got
        while a pause began is given back (never held while waiting)."""
        await self.slots.acquire()
        while self.paused_until > self.clock.now():
            self.slots.release()
            await self.wait_unpaused()
            await self.slots.acquire()

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one of the endpoint's concurrent-request slots for the request's duration."""
        await self.acquire_slot()
        try:
            yield
        finally:
            self.slots.release()

    def reconcile(self, estimated_tokens: int, actual_tokens: int) -> None:
        """Correct the token bucket once the real usage is known (0 for an attempt that
        failed: it gets its estimate back)."""
        if self.tokens is not None and estimated_tokens:
            self.tokens.give(estimated_tokens - actual_tokens)

    def _set_concurrency(self, new: int, reason: str) -> None:
        old = self.concurrency
        if new != old:
            self.slots.resize(new)
            self.history.append((time.time(), old, new, reason))

    @property
    def storming(self) -> bool:
        """Whether recent answers are 429s often enough to mean the endpoint is limited."""
        seen = len(self._recent)
        return seen >= MIN_SEEN and sum(self._recent) / seen >= STORM_SHARE

    def on_rate_limited(self, retry_after: float | None) -> None:
        """A 429. If the endpoint is rate limited (a configured bucket, or a storm):
        pause it until the Retry-After has passed and halve its concurrency."""
        self._recent.append(True)
        self._successes = 0
        if self.requests is None and self.tokens is None and not self.storming:
            return
        now = self.clock.now()
        wait = retry_after if retry_after is not None else 1.0
        self.paused_until = max(self.paused_until, now + wait)
        if self.adaptive and now >= self._next_decrease:
            self._next_decrease = now + max(wait, 1.0)
            self._set_concurrency(max(1, self.concurrency // 2), "rate_limit")

    def on_success(self) -> None:
        """A clean success: after as many as the current limit, allow one more."""
        self._recent.append(False)
        if not self.adaptive or self.concurrency >= self.max_concurrency:
            return
        self._successes += 1
        if self._successes >= self.concurrency:
            self._successes = 0
            self._set_concurrency(self.concurrency + 1, "steady_state_up")


class LimitsRegistry:
    """Every endpoint limiter of a run, made on first use."""

    def __init__(
        self, defaults: Limits | None = None, concurrency: int = 32, clock: Clock | None = None
    ) -> None:
        self.defaults = defaults or Limits()
        self.concurrency = concurrency
        self.clock = clock or SystemClock()
        self._limiters: dict[tuple[str, str, str], EndpointLimiter] = {}

    def get(self, endpoint: tuple[str, str, str], limits: Limits | None) -> EndpointLimiter:
        """The endpoint's limiter; a model's own `limits` not seen before are merged in."""
        limiter = self._limiters.get(endpoint)
        if limiter is None:
            limiter = self._limiters[endpoint] = self.new_limiter(endpoint)
        if limits is not None and limits not in limiter.model_limits:
            limiter.model_limits += (limits,)
            own = functools.reduce(Limits.stricter, limiter.model_limits)
            limiter.configure(own.over(self.defaults))
        return limiter

    def new_limiter(self, endpoint: tuple[str, str, str]) -> EndpointLimiter:
        """The limiter of an endpoint first seen (a registry of shared limits makes its own)."""
        return EndpointLimiter(self.defaults, self.concurrency, self.clock)

    def items(self) -> list[tuple[tuple[str, str, str], EndpointLimiter]]:
        return list(self._limiters.items())
