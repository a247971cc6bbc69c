"""Retries: a call's attempts, and the waits between them.

Each attempt passes what is below (the endpoint's limits and the provider's send, or a
batch queue) afresh. A retryable failure (`pacing/retry.py`) is tried again after a
backoff that honours Retry-After, up to the policy's `max_attempts`; each retry gets a
note (kept with the call, counted by the run), and the first retry at an endpoint is
announced once as a warning. While it waits, the sample lends its seat; it never holds
a connection slot (the limits below took theirs back).

A call given up on is judged by its endpoint's repeated failures (the same client error,
call after call, stops the run: `pacing/repeats.py`) and recorded by `gave_up` (the
accounting's) before its error goes up.

An attempt that timed out (our `Retry(timeout=)`, or the transport's) went out, and the
provider may bill it: `lost` (the accounting's) charges it at once, and before the next
attempt the call awaits `call.again` when a layer above set it (the budget takes room
for the attempt anew). A dropped connection is not counted so: the transports do not
tell one dropped after the request was sent from one that failed before (both are a
`ProviderUnavailable`).

The policy: the model's own `Retry`, else the run's (else the default). A model's own
`Retry(sample_timeout=)` is a `ConfigError`: that is a run setting.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..._errors import ConfigError, ProviderError, ProviderTimeout
from ..._logging import log
from ...pacing.clock import Clock
from ...pacing.limits import EndpointLimiter
from ...pacing.retry import Retry, backoff_delay
from ...providers.base import Provider
from ...vocab.model_calls import RetryNote
from ...vocab.turns import Turn
from .call import Call, Send

__all__ = ["Retries"]

#: Endpoints whose retries were announced, for calls outside any run (a run keeps its own).
_ANNOUNCED: set[tuple[str, str, str]] = set()


def _reason(error: ProviderError) -> str:
    status = f"HTTP {error.status}" if error.status is not None else type(error).__name__
    return f"{status}: {error.message}"[:200]


class Retries:
    """Attempt a call until one attempt succeeds or the policy gives up."""

    __slots__ = ("clock", "gave_up", "lost", "on_retry", "policy")

    def __init__(
        self,
        policy: Retry,
        clock: Clock,
        gave_up: Callable[[Call, ProviderError], None],
        lost: Callable[[Call], None] | None = None,
        on_retry: Callable[[RetryNote], None] | None = None,
    ) -> None:
        self.policy = policy
        self.clock = clock
        self.gave_up = gave_up
        #: Charges an attempt that timed out after its request went out (None: nobody).
        self.lost = lost
        #: Told of each retry (the run's count; None: nobody).
        self.on_retry = on_retry

    async def __call__(self, call: Call, send: Send) -> Turn:
        policy = call.provider.retry
        if policy is None:
            policy = self.policy
        else:
            _check_own(call.provider, policy)
        call.timeout = policy.timeout
        call.started = time.time()
        attempt = 0
        while True:
            attempt += 1
            try:
                return await send(call)
            except ProviderError as exc:
                timed_out = isinstance(exc, ProviderTimeout)
                if timed_out and self.lost is not None:
                    self.lost(call)
                if not exc.retryable or attempt >= policy.max_attempts:
                    if call.limiter is not None:
                        call.limiter.repeats.judge(exc)
                    self.gave_up(call, exc)
                    raise
                await self._wait(call, attempt, exc, policy)
                if timed_out and call.again is not None:
                    await call.again()

    async def _wait(self, call: Call, attempt: int, exc: ProviderError, policy: Retry) -> None:
        """Note the retry and wait before the next attempt, lending the sample's seat."""
        provider = call.provider
        wait = backoff_delay(attempt, exc, policy)
        note = RetryNote(time.time(), provider.model_id, attempt, _reason(exc), wait)
        call.notes.append(note)
        log.info(
            "retrying model call",
            model=provider.model_id,
            attempt=attempt,
            reason=note.reason,
            wait=round(wait, 3),
        )
        _announce(provider, call.limiter, note)
        if self.on_retry is not None:
            self.on_retry(note)
        scope = call.scope
        if scope is not None and scope.limits is not None:
            scope.limits.waited(wait)  # not working time
        seat = scope.seat if scope is not None else None
        if seat is not None:
            await seat.wait_out(wait, self.clock.sleep)  # lends the sample's seat meanwhile
        else:
            await self.clock.sleep(wait)


def _check_own(provider: Provider, policy: Retry) -> None:
    """A model's own policy may not set what only a run can (`sample_timeout`)."""
    if policy.sample_timeout is not None:
        raise ConfigError(
            f"{provider.model_id} was given Retry(sample_timeout={policy.sample_timeout:g}): "
            "sample_timeout is a run setting, pass it to eval(retry=Retry(sample_timeout=...))."
        )


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
