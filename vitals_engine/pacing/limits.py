"""Rate limits that belong to a model endpoint, shared by every call to it.

An endpoint is (provider, base URL, model). All calls to it, from solvers and
judges alike and from every run in the same event loop, go through one
`EndpointState`, which each run reaches through its own `EndpointLimiter`:

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

Whose limits: a model's own `RateLimits` win field by field over the run's;
when chats with different own limits share an endpoint, the stricter of
each applies (the lowest number; adaptive if any asks for it). Runs that
share an endpoint combine the same way (see `RunLimits`).

Per process, per event loop: a run's registry (`RunLimits`) finds the
endpoint's state in its event loop (an anyio `RunVar`: a process may run
several loops in threads, each with its own), so two runs, or two
`eval_async()` of one service, share one endpoint's limits; the state is
forgotten when the last run using it ends.
"""

from __future__ import annotations

import functools
import math
import operator
import time
import warnings
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TypeVar

import anyio
from anyio.lowlevel import RunVar

from .._errors import ConfigError
from .admission import Admission
from .clock import Clock, SystemClock
from .repeats import RepeatedFailures

__all__ = [
    "Endpoint",
    "EndpointLimiter",
    "EndpointState",
    "Limits",
    "LimitsRegistry",
    "RateLimits",
    "RunLimits",
    "TokenBucket",
    "cost_budget_of",
]

#: (provider, base URL, model): the unit limits belong to.
Endpoint = tuple[str, str, str]

#: Answers remembered per endpoint to tell a rate-limit storm from a stray 429.
WINDOW = 20
#: Share of 429s among them (with at least MIN_SEEN answers) that means a storm.
STORM_SHARE = 0.4
MIN_SEEN = 5

_N = TypeVar("_N", int, float)


@dataclass(frozen=True, slots=True)
class RateLimits:
    """How hard a model endpoint may be driven.

    Args:
        max_concurrency: requests in flight at once (default: the run's concurrency).
        rpm: requests per minute.
        tpm: tokens per minute (input + output).
        adaptive: lower concurrency on 429s and raise it back on success
            (None: the run's setting, else on).

    Example:
        >>> chat_openai(model="gpt-4.1-mini", rate_limits=RateLimits(max_concurrency=20, rpm=500))
        >>> task.eval(rate_limits=RateLimits(rpm=60))   # the default for every model in the run
    """

    max_concurrency: int | None = None
    rpm: float | None = None
    tpm: float | None = None
    adaptive: bool | None = None

    def __post_init__(self) -> None:
        for name in ("max_concurrency", "rpm", "tpm"):
            _check_positive(type(self).__name__, name, getattr(self, name))

    def over(self, defaults: RateLimits | None) -> RateLimits:
        """These limits, with what they leave unset taken from `defaults`."""
        if defaults is None:
            return self
        return RateLimits(
            self.max_concurrency or defaults.max_concurrency,
            self.rpm or defaults.rpm,
            self.tpm or defaults.tpm,
            defaults.adaptive if self.adaptive is None else self.adaptive,
        )

    def stricter(self, other: RateLimits) -> RateLimits:
        """The tighter of each limit of two chats sharing one endpoint (None: no limit)."""
        pair = (self.adaptive, other.adaptive)
        return RateLimits(
            _least(self.max_concurrency, other.max_concurrency),
            _least(self.rpm, other.rpm),
            _least(self.tpm, other.tpm),
            True if True in pair else False if False in pair else None,
        )


@dataclass(frozen=True, slots=True)
class Limits(RateLimits):
    """`RateLimits` under its old name, deprecated: it warns when made, and its `max_cost`
    is a model's cost budget (`chat_*(cost_budget=)`; `eval(model_cost_budget=)` for every
    model of a run), which the chat or the run takes from it."""

    max_cost: float | None = None

    def __post_init__(self) -> None:
        RateLimits.__post_init__(self)
        _check_positive("Limits", "max_cost", self.max_cost)
        said = "use ve.RateLimits(...) instead"
        if self.max_cost is not None:
            said += (
                ", and a model's budget as chat_*(cost_budget=) (every model of a run: "
                "eval(model_cost_budget=))"
            )
        warnings.warn(
            f"ve.Limits is deprecated and will be removed in the next release: {said}.",
            DeprecationWarning,
            stacklevel=3,
        )


def cost_budget_of(limits: RateLimits | None) -> float | None:
    """The model cost budget a deprecated `Limits(max_cost=)` carries (None: none)."""
    return limits.max_cost if isinstance(limits, Limits) else None


def _check_positive(kind: str, name: str, value: float | None) -> None:
    if value is not None and (isinstance(value, bool) or not math.isfinite(value) or value <= 0):
        raise ConfigError(
            f"{kind}({name}={value!r}) must be a positive finite number, or None for no limit."
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


class EndpointState:
    """What limits one endpoint: its slots, buckets, pause and adaptive state, and the
    limiters (one per run) that use it. The runs that call an endpoint in one event
    loop share one (see `RunLimits`); a limiter made alone has its own."""

    __slots__ = (
        "adaptive",
        "admission",
        "clock",
        "gate",
        "limits",
        "max_concurrency",
        "next_decrease",
        "paused_until",
        "recent",
        "requests",
        "slots",
        "successes",
        "tokens",
        "users",
    )

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.slots = Slots(0)
        self.requests: TokenBucket | None = None
        self.tokens: TokenBucket | None = None
        self.limits = RateLimits()
        self.adaptive = True
        self.max_concurrency = 0
        self.paused_until = -math.inf
        self.gate = anyio.Lock()
        self.recent: deque[bool] = deque(maxlen=WINDOW)  # True: a 429
        self.successes = 0
        self.next_decrease = -math.inf
        self.users: list[EndpointLimiter] = []
        #: Whether new samples may start, by the calls in progress (see `admission.py`).
        self.admission = Admission(lambda: self.slots.size)

    def settle(self) -> None:
        """Apply what the limiters using the endpoint ask: the stricter of each limit; a
        concurrency none of them sets is theirs added up. What the endpoint learnt (a
        lowered concurrency, bucket levels, a pause) is kept."""
        users = self.users
        limits = functools.reduce(RateLimits.stricter, (user.asked for user in users))
        old_max = self.max_concurrency
        self.limits = limits
        self.adaptive = limits.adaptive is not False
        self.max_concurrency = limits.max_concurrency or sum(
            user.default_concurrency for user in users
        )
        size = self.slots.size
        self.slots.resize(
            min(size, self.max_concurrency) if size < old_max else self.max_concurrency
        )
        rpm, tpm = limits.rpm, limits.tpm
        self.requests = _bucket(self.requests, rpm, (rpm or 0) / 60, self.clock)
        self.tokens = _bucket(self.tokens, tpm, tpm or 0, self.clock)


class EndpointLimiter:
    """A run's limiter of one endpoint: pause gate, buckets and adaptive concurrency.

    What limits the endpoint lives in `shared` (an `EndpointState`, shared with the
    other runs calling the endpoint in this event loop when the run's registry is a
    `RunLimits`). The run's own: the limits it asks (`asked`, and its
    `default_concurrency`), the concurrency changes it saw (`history`), and whether it
    said its calls to the endpoint are being retried.

    Example:
        >>> limits = RateLimits(max_concurrency=8, rpm=600)
        >>> limiter = EndpointLimiter(limits, default_concurrency=32)
        >>> await limiter.wait_turn()
        >>> async with limiter.slot():
        ...     ...  # send the request
    """

    def __init__(
        self,
        limits: RateLimits,
        default_concurrency: int,
        clock: Clock | None = None,
        shared: EndpointState | None = None,
    ):
        self.shared = shared or EndpointState(clock or SystemClock())
        self.default_concurrency = default_concurrency
        #: What this run asks of the endpoint (its models' own limits over its defaults).
        self.asked = limits
        #: The models' own limits merged into these (see `LimitsRegistry.get`).
        self.model_limits: tuple[RateLimits, ...] = ()
        #: Whether a warning said this run's calls to the endpoint are being retried.
        self.retries_announced = False
        #: Concurrency changes while this run used the endpoint: (unix time, old limit,
        #: new limit, reason), reasons as Inspect's logs name them ("rate_limit",
        #: "steady_state_up").
        self.history: list[tuple[float, int, int, str]] = []
        #: Whether the run's solver calls the endpoint (its new samples wait for its
        #: admission).
        self.solver_calls = False
        #: The run's client errors at the endpoint until a call succeeded: the same one,
        #: call after call, stops the run.
        self.repeats = RepeatedFailures()
        self.joined = False
        self.join(self.shared)

    # What limits the endpoint, as attributes (a leased limiter sets them: distributed/).

    @property
    def clock(self) -> Clock:
        return self.shared.clock

    @property
    def slots(self) -> Slots:
        return self.shared.slots

    @slots.setter
    def slots(self, slots: Slots) -> None:
        self.shared.slots = slots

    @property
    def requests(self) -> TokenBucket | None:
        return self.shared.requests

    @requests.setter
    def requests(self, bucket: TokenBucket | None) -> None:
        self.shared.requests = bucket

    @property
    def tokens(self) -> TokenBucket | None:
        return self.shared.tokens

    @tokens.setter
    def tokens(self, bucket: TokenBucket | None) -> None:
        self.shared.tokens = bucket

    @property
    def paused_until(self) -> float:
        return self.shared.paused_until

    @paused_until.setter
    def paused_until(self, when: float) -> None:
        self.shared.paused_until = when

    @property
    def limits(self) -> RateLimits:
        """The limits that hold for the endpoint (the stricter of what its runs ask)."""
        return self.shared.limits

    @limits.setter
    def limits(self, limits: RateLimits) -> None:
        self.shared.limits = limits

    @property
    def adaptive(self) -> bool:
        return self.shared.adaptive

    @adaptive.setter
    def adaptive(self, adaptive: bool) -> None:
        self.shared.adaptive = adaptive

    @property
    def max_concurrency(self) -> int:
        return self.shared.max_concurrency

    @max_concurrency.setter
    def max_concurrency(self, size: int) -> None:
        self.shared.max_concurrency = size

    @property
    def admission(self) -> Admission:
        return self.shared.admission

    @property
    def _recent(self) -> deque[bool]:
        return self.shared.recent

    @property
    def concurrency(self) -> int:
        """The current concurrency limit."""
        return self.shared.slots.size

    @property
    def in_flight(self) -> int:
        return self.shared.slots.taken

    # -- the run's use of the endpoint --------------------------------------------------

    def join(self, shared: EndpointState) -> None:
        """Use `shared` (another run's, or a fresh one) from now on; its limits become
        the stricter of its runs' and this one's."""
        self.shared = shared
        shared.users.append(self)
        self.joined = True
        self.configure(self.asked)

    def leave(self) -> bool:
        """This run no longer uses the endpoint: the limits the others ask hold again.
        True when no run uses it any more."""
        users = self.shared.users
        if self.joined:
            self.joined = False
            users.remove(self)
            if users:
                self.shared.settle()
        return not users

    def configure(self, limits: RateLimits) -> None:
        """Ask `limits` for this run, keeping what the endpoint has learnt (a lowered
        concurrency, bucket levels, a pause)."""
        self.asked = limits
        self.shared.settle()

    # -- limiting ------------------------------------------------------------------------

    async def wait_unpaused(self) -> None:
        """Wait until the endpoint's pause (if any) has passed."""
        shared = self.shared
        async with shared.gate:
            while (wait := shared.paused_until - shared.clock.now()) > 0:
                await shared.clock.sleep(wait)

    async def wait_turn(self, estimated_tokens: int = 0) -> None:
        """Wait until the endpoint is not paused and the buckets allow one more request."""
        shared = self.shared
        if shared.paused_until > shared.clock.now():
            await self.wait_unpaused()
        if shared.requests is not None:
            await shared.requests.take(1)
        if shared.tokens is not None and estimated_tokens:
            await shared.tokens.take(estimated_tokens)

    async def acquire_slot(self) -> Slots:
        """Take a concurrent-request slot once the endpoint is not paused; a slot got
        while a pause began is given back (never held while waiting). Returns the slots
        it was taken from, to give it back to (`release()`), whatever the endpoint's
        slots are by then."""
        shared = self.shared
        slots = shared.slots
        await slots.acquire()
        while shared.paused_until > shared.clock.now():
            slots.release()
            await self.wait_unpaused()
            slots = shared.slots
            await slots.acquire()
        return slots

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one of the endpoint's concurrent-request slots for the request's duration.

        Example:
            >>> async with limiter.slot():
            ...     turn = await provider.generate(request)
        """
        slots = await self.acquire_slot()
        try:
            yield
        finally:
            slots.release()

    def reconcile(self, estimated_tokens: int, actual_tokens: int) -> None:
        """Correct the token bucket once the real usage is known (0 for an attempt that
        failed: it gets its estimate back)."""
        tokens = self.shared.tokens
        if tokens is not None and estimated_tokens:
            tokens.give(estimated_tokens - actual_tokens)

    def _set_concurrency(self, new: int, reason: str) -> None:
        shared = self.shared
        old = shared.slots.size
        if new != old:
            shared.slots.resize(new)
            change = (time.time(), old, new, reason)
            for user in shared.users:
                user.history.append(change)

    @property
    def storming(self) -> bool:
        """Whether recent answers are 429s often enough to mean the endpoint is limited."""
        recent = self.shared.recent
        seen = len(recent)
        return seen >= MIN_SEEN and sum(recent) / seen >= STORM_SHARE

    def on_rate_limited(self, retry_after: float | None) -> None:
        """A 429. If the endpoint is rate limited (a configured bucket, or a storm):
        pause it until the Retry-After has passed and halve its concurrency."""
        shared = self.shared
        shared.recent.append(True)
        shared.successes = 0
        if shared.requests is None and shared.tokens is None and not self.storming:
            return
        now = shared.clock.now()
        wait = retry_after if retry_after is not None else 1.0
        shared.paused_until = max(shared.paused_until, now + wait)
        if shared.adaptive and now >= shared.next_decrease:
            shared.next_decrease = now + max(wait, 1.0)
            self._set_concurrency(max(1, self.concurrency // 2), "rate_limit")

    def on_success(self) -> None:
        """A clean success: after as many as the current limit, allow one more."""
        self.repeats.succeeded = True
        shared = self.shared
        shared.recent.append(False)
        if not shared.adaptive or shared.slots.size >= shared.max_concurrency:
            return
        shared.successes += 1
        if shared.successes >= shared.slots.size:
            shared.successes = 0
            self._set_concurrency(shared.slots.size + 1, "steady_state_up")


class LimitsRegistry:
    """Every endpoint limiter of a run, made on first use, each with limits of its own.

    Example:
        >>> registry = LimitsRegistry(RateLimits(rpm=500), concurrency=32)
        >>> limiter = registry.get(("OpenAI", "https://api.openai.com/v1", "gpt-4.1"), None)
    """

    def __init__(
        self, defaults: RateLimits | None = None, concurrency: int = 32, clock: Clock | None = None
    ) -> None:
        self.defaults = defaults or RateLimits()
        self.concurrency = concurrency
        self.clock = clock or SystemClock()
        self._limiters: dict[Endpoint, EndpointLimiter] = {}

    def get(self, endpoint: Endpoint, limits: RateLimits | None) -> EndpointLimiter:
        """The endpoint's limiter; a model's own `limits` not seen before are merged in."""
        limiter = self._limiters.get(endpoint)
        if limiter is None:
            limiter = self._limiters[endpoint] = self.new_limiter(endpoint)
        if limits is not None and limits not in limiter.model_limits:
            limiter.model_limits += (limits,)
            own = functools.reduce(RateLimits.stricter, limiter.model_limits)
            limiter.configure(own.over(self.defaults))
        return limiter

    def new_limiter(self, endpoint: Endpoint) -> EndpointLimiter:
        """The limiter of an endpoint first seen (a registry of shared limits makes its own)."""
        return EndpointLimiter(self.defaults, self.concurrency, self.clock)

    def items(self) -> list[tuple[Endpoint, EndpointLimiter]]:
        return list(self._limiters.items())

    def solver_admissions(self) -> list[Admission]:
        """The admissions of the endpoints the run's solver calls, in one order for every
        run (so that samples waiting on two endpoints never hold each other up)."""
        limiters = self._limiters
        if len(limiters) == 1:
            (limiter,) = limiters.values()
            return [limiter.admission] if limiter.solver_calls else []
        return [
            limiter.admission
            for _, limiter in sorted(limiters.items(), key=operator.itemgetter(0))
            if limiter.solver_calls
        ]

    def close(self) -> None:
        """The run is over: let go of what it shares with other runs (here, nothing)."""


#: The endpoint states of each event loop, by endpoint (and clock, when not the system's).
_SHARED: RunVar[dict[tuple[Endpoint, Clock | None], EndpointState]] = RunVar(
    "vitals_engine_endpoints"
)


class RunLimits(LimitsRegistry):
    """A run's endpoint limiters, sharing each endpoint with the other runs that call it
    in the same event loop: one concurrency, one rpm and tpm, one pause, one adaptive
    concurrency per endpoint, whichever run calls.

    How two runs' settings combine: the stricter of each limit holds (the lowest
    number, adaptive if either asks); a `max_concurrency` that no run sets for the
    endpoint (neither a model's own `RateLimits` nor `eval(limits=)`) is the runs' own
    `max_concurrency` added up, so runs without limits do not slow each other down.
    Each run keeps its own `history` of the changes it saw. `close()` (at the end of
    the run) leaves every endpoint; the last run to leave one forgets it, so a later
    run starts afresh: nothing a finished run learnt (a pause, a halved concurrency)
    throttles the next.

    Example:
        >>> a, b = RunLimits(RateLimits(max_concurrency=5)), RunLimits(None, concurrency=50)
        >>> a.get(endpoint, None).shared is b.get(endpoint, None).shared   # in one loop
        True
        >>> b.get(endpoint, None).max_concurrency
        5
        >>> a.close(); b.close()
    """

    def __init__(
        self, defaults: RateLimits | None = None, concurrency: int = 32, clock: Clock | None = None
    ) -> None:
        super().__init__(defaults, concurrency, clock)
        #: The endpoint states of the run's event loop (known once it used an endpoint).
        self._states: dict[tuple[Endpoint, Clock | None], EndpointState] = {}

    def get(self, endpoint: Endpoint, limits: RateLimits | None) -> EndpointLimiter:
        limiter = self._limiters.get(endpoint)
        if limiter is not None and not limiter.joined:  # the run goes on after close()
            limiter.join(self._shared(endpoint))
        return super().get(endpoint, limits)

    def new_limiter(self, endpoint: Endpoint) -> EndpointLimiter:
        return EndpointLimiter(
            self.defaults, self.concurrency, self.clock, shared=self._shared(endpoint)
        )

    def _key(self, endpoint: Endpoint) -> tuple[Endpoint, Clock | None]:
        return endpoint, None if isinstance(self.clock, SystemClock) else self.clock

    def _shared(self, endpoint: Endpoint) -> EndpointState:
        states = _SHARED.get(None)
        if states is None:
            states = {}
            _SHARED.set(states)
        self._states = states
        key = self._key(endpoint)
        state = states.get(key)
        if state is None:
            state = states[key] = EndpointState(self.clock)
        return state

    def close(self) -> None:
        states = self._states
        for endpoint, limiter in self._limiters.items():
            if limiter.joined and limiter.leave():
                key = self._key(endpoint)
                if states.get(key) is limiter.shared:
                    del states[key]
