"""One model call: the single place every request of every chat goes through.

`call_model` applies the endpoint's limits (pause gate, rpm/tpm buckets,
adaptive concurrency), retries retryable failures with backoff that honours
Retry-After, prices the reply, and records it in the current `CallScope`:

- the run's usage ledger and the sample's, under the scope's role (solver
  or scorer), so cost by role and model is exact;
- the sample's list of model calls (with timing and retries), which the log
  turns into model events.

The engine opens a scope around each sample's solve and score stage. A chat
used outside any run gets no shared limits but still the default retries.
Waiting for a retry never holds a connection slot.

With a cache (the run's `cache=` or the model's own), the call is looked up before
anything else: a hit takes no slot, no rate limit and no batch, costs 0, and is
recorded as cached; a miss goes out as usual and its reply is kept. Errors are
never kept.
"""

from __future__ import annotations

import time

import anyio
import msgspec

from .._errors import ConfigError, ProviderError, ProviderTimeout, RateLimitError
from .._logging import log
from ..caching.lookup import CacheEntry, cache_entry
from ..caching.store import CachedReply
from ..pacing.batch_mode import BatchCalls, Caller
from ..pacing.clock import Clock, SystemClock
from ..pacing.limits import EndpointLimiter
from ..pacing.retry import Retry, backoff_delay
from ..pacing.scope import CallScope, current_scope
from ..pacing.seats import Seat
from ..providers.base import Provider
from ..vocab.model_calls import ChatRequest, ModelCall, RetryNote
from ..vocab.pricing import cost_of
from ..vocab.turns import TokenUsage, Turn

__all__ = ["call_model", "estimate_tokens"]

DEFAULT_RETRY = Retry()
_SYSTEM_CLOCK = SystemClock()
#: Endpoints whose retries were announced, for calls outside any run (a run keeps its own).
_ANNOUNCED: set[tuple[str, str, str]] = set()


def estimate_tokens(request: ChatRequest) -> int:
    """A cheap guess of a call's tokens before it is made (about 4 characters a token)."""
    chars = len(request.system_prompt or "") + sum(len(t.text) for t in request.turns)
    params = {**request.params}
    output = params.get("max_tokens") or params.get("max_completion_tokens") or 256
    return chars // 4 + int(output)


def _reason(error: ProviderError) -> str:
    status = f"HTTP {error.status}" if error.status is not None else type(error).__name__
    return f"{status}: {error.message}"[:200]


async def _attempt(
    provider: Provider,
    request: ChatRequest,
    attempt_timeout: float | None,
    limiter: EndpointLimiter | None,
) -> Turn:
    try:
        if limiter is None:
            return await _send(provider, request, attempt_timeout)
        slots = limiter.slots
        await slots.acquire()
        if limiter.paused_until > limiter.clock.now():
            slots.release()  # the endpoint paused while we queued: wait without the slot
            await limiter.acquire_slot()
        try:
            return await _send(provider, request, attempt_timeout)
        finally:
            slots.release()
    except TimeoutError as exc:
        raise ProviderTimeout(
            _timeout_message(attempt_timeout, exc), provider=provider.name, model=provider.model
        ) from exc


def _timeout_message(attempt_timeout: float | None, exc: TimeoutError) -> str:
    if attempt_timeout is not None:
        return f"no answer within {attempt_timeout:g}s"
    detail = str(exc)
    return f"the request timed out: {detail}" if detail else "the request timed out"


async def _send(provider: Provider, request: ChatRequest, attempt_timeout: float | None) -> Turn:
    if attempt_timeout is None:
        return await provider.generate(request)
    with anyio.fail_after(attempt_timeout):
        return await provider.generate(request)


def _caller(scope: CallScope | None) -> Caller | None:
    """Who makes the call: (sample id, epoch, role), when a sample's stage does."""
    if scope is None or scope.sample is None:
        return None
    return (scope.sample[0], scope.sample[1], scope.role)


async def _answered(
    batches: BatchCalls,
    provider: Provider,
    request: ChatRequest,
    scope: CallScope | None,
    seat: Seat | None,
) -> tuple[Turn, str] | None:
    """The reply a batch of the resumed run gave this call, if one did; the sample lends
    its seat while that batch is asked about."""
    caller = _caller(scope)
    if caller is None:
        return None
    if seat is None:
        return await batches.answered(provider, request, caller)
    return await seat.lent_while(lambda: batches.answered(provider, request, caller))


async def _in_batch(
    batches: BatchCalls,
    provider: Provider,
    request: ChatRequest,
    scope: CallScope | None,
    seat: Seat | None,
) -> tuple[Turn, str]:
    """The call sent in a provider batch (its reply, the batch's id); the sample lends its
    seat while it waits (no attempt timeout: a batch may take hours)."""
    caller = _caller(scope)
    if seat is None:
        return await batches.call(provider, request, caller)
    return await seat.lent_while(lambda: batches.call(provider, request, caller))


def _cache_entry(
    provider: Provider, request: ChatRequest, scope: CallScope | None
) -> CacheEntry | None:
    use = scope.cache if scope is not None else None
    own = provider.cache
    if own is False or (own is None and (use is None or use.default is None)):
        return None
    seen = None
    if scope is not None:
        seen = scope.cache_seen
        if seen is None:
            seen = scope.cache_seen = {}
    return cache_entry(
        use,
        own,
        provider=provider.name,
        base_url=provider.base_url,
        model=provider.model,
        model_params=provider.reply_params,
        request=request,
        epoch=scope.sample[1] if scope is not None and scope.sample is not None else 1,
        seen=seen,
    )


def _from_cache(
    provider: Provider, request: ChatRequest, scope: CallScope | None, hit: CachedReply
) -> Turn:
    """The cached reply as this call's turn: at cost 0, recorded as read from the cache."""
    turn = msgspec.structs.replace(hit.turn, cost=0.0, retries=0)
    if scope is not None:
        now = time.time()
        call = ModelCall(
            scope.role, provider.model_id, request, turn, now, now,
            cache="read", cached_from=hit.origin, config=provider.call_config(request) or None,
        )  # fmt: skip
        _account(scope, provider, call, 0.0, cached=True)
    return turn


def _account(
    scope: CallScope,
    provider: Provider,
    call: ModelCall,
    cost: float | None,
    *,
    batch: bool = False,
    cached: bool = False,
) -> None:
    """Charge a completed call to the scope's ledgers and add it to the sample's calls."""
    tokens = (call.reply.tokens if call.reply is not None else None) or TokenUsage()
    for ledger in scope.ledgers:
        ledger.record(
            scope.role, provider.name, provider.model, tokens, cost, batch=batch, cached=cached
        )
    if scope.calls is not None:
        scope.calls.append(call)


async def call_model(provider: Provider, request: ChatRequest) -> Turn:
    """Send `request` to `provider` under the scope's limits and retries; return the
    priced assistant turn."""
    scope = current_scope()
    entry = _cache_entry(provider, request, scope)
    if entry is not None and (hit := entry.hit()) is not None:
        return _from_cache(provider, request, scope, hit)
    if scope is not None and scope.budget is not None:
        scope.budget.on_call(provider.name, provider.model, provider.limits)
    policy = provider.retry
    if policy is None:
        policy = (scope.retry if scope else None) or DEFAULT_RETRY
    elif policy.sample_timeout is not None:
        raise ConfigError(
            f"{provider.model_id} was given Retry(sample_timeout={policy.sample_timeout:g}): "
            "sample_timeout is a run setting, pass it to eval(retry=Retry(sample_timeout=...))."
        )
    clock = scope.clock if scope and scope.clock else _SYSTEM_CLOCK
    batches = scope.batches if scope else None
    seat = scope.seat if scope else None
    taken: tuple[Turn, str] | None = None
    if batches is not None and not batches.takes(provider):
        if batches.resumed:  # a batch the run it resumes sent may hold this call's reply
            taken = await _answered(batches, provider, request, scope, seat)
        batches = None
    batched = batches is not None or taken is not None
    # a batched call is no live request: the endpoint's live limits do not apply to it
    limiter = scope.limiter(provider.endpoint, provider.limits) if scope and not batched else None
    estimate = estimate_tokens(request) if limiter is not None and limiter.tokens else 0
    if limiter is not None and scope is not None and scope.role == "solver":
        limiter.solver_calls = True  # the run's new samples wait for this endpoint's admission
    if seat is not None:
        seat.calls += 1
    try:
        if taken is not None:
            (turn, batch_id), notes, started = taken, [], time.time()
        else:
            turn, notes, started, batch_id = await _call_with_retries(
                provider, request, policy, scope, limiter, estimate, clock, seat, batches
            )
    finally:
        if seat is not None:
            seat.calls -= 1
    tokens = turn.tokens or TokenUsage()
    if limiter is not None:
        limiter.on_success()
        limiter.reconcile(estimate, estimate if turn.tokens is None else tokens.total)
    cost = cost_of(
        provider.name, turn.model or provider.model, tokens, batch=batched, tier=turn.service_tier
    )
    turn = msgspec.structs.replace(turn, cost=cost, retries=len(notes))
    if entry is not None:
        entry.keep(
            turn,
            scope.sample if scope is not None else None,
            scope.role if scope is not None else None,
        )
    if scope is not None:
        call = ModelCall(
            scope.role, provider.model_id, request, turn, started, time.time(), notes,
            batch=batch_id, cache="write" if entry is not None else None,
            config=provider.call_config(request) or None,
        )  # fmt: skip
        _account(scope, provider, call, cost, batch=batched)
    return turn


async def _call_with_retries(
    provider: Provider,
    request: ChatRequest,
    policy: Retry,
    scope: CallScope | None,
    limiter: EndpointLimiter | None,
    estimate: int,
    clock: Clock,
    seat: Seat | None,
    batches: BatchCalls | None = None,
) -> tuple[Turn, list[RetryNote], float, str | None]:
    """Attempts until one succeeds (the reply, the retries, when the call started, the id
    of the batch that answered it if any), or the error that ends them, recorded in the
    scope."""
    notes: list[RetryNote] = []
    started = time.time()
    attempt = 0
    batch_id: str | None = None
    while True:
        attempt += 1
        if limiter is not None:
            await limiter.wait_turn(estimate)
        try:
            if batches is not None:
                turn, batch_id = await _in_batch(batches, provider, request, scope, seat)
            else:
                turn = await _attempt(provider, request, policy.timeout, limiter)
            break
        except ProviderError as exc:
            if limiter is not None:
                limiter.reconcile(estimate, 0)  # a failed attempt is not charged
                if isinstance(exc, RateLimitError):
                    limiter.on_rate_limited(exc.retry_after)
            if not exc.retryable or attempt >= policy.max_attempts:
                if limiter is not None:
                    limiter.repeats.judge(exc)
                if scope is not None and scope.calls is not None:
                    scope.calls.append(
                        ModelCall(
                            scope.role,
                            provider.model_id,
                            request,
                            None,
                            started,
                            time.time(),
                            notes,
                            error=str(exc),
                        )
                    )
                raise
            wait = backoff_delay(attempt, exc, policy)
            note = RetryNote(time.time(), provider.model_id, attempt, _reason(exc), wait)
            notes.append(note)
            log.info(
                "retrying model call",
                model=provider.model_id,
                attempt=attempt,
                reason=note.reason,
                wait=round(wait, 3),
            )
            _announce(provider, limiter, note)
            if scope is not None and scope.on_retry is not None:
                scope.on_retry(note)
            if seat is not None:
                await seat.wait_out(wait, clock.sleep)  # lends the sample's seat meanwhile
            else:
                await clock.sleep(wait)
    return turn, notes, started, batch_id


def _announce(provider: Provider, limiter: EndpointLimiter | None, note: RetryNote) -> None:
    """Say on the library's logger, as a warning (on stderr unless the application set up
    logging), that an endpoint's calls are being retried: once per endpoint per run (once
    per process for calls outside a run), never once per request."""
    if limiter is not None:
        if limiter.retries_announced:
            return
        limiter.retries_announced = True
    else:
        if provider.endpoint in _ANNOUNCED:
            return
        _ANNOUNCED.add(provider.endpoint)
    log.warning(
        f"vitals-engine: calls to {provider.model_id} at {provider.base_url} are being retried "
        f"(first: {note.reason}). Said once per endpoint; every retry is counted on the "
        "progress line and recorded in the log."
    )
