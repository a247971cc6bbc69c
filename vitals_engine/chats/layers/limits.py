"""The endpoint's limits, around each attempt (under the retries, so a retry takes its turn
again and never holds a slot while it waits).

At a call's first attempt the layer finds the run's limiter of the model's endpoint
(`pacing/limits.py`: shared with the run's other calls there, and the other runs of its
event loop) and marks the endpoint as one the run's solver calls (its new samples then
wait for its admission). The tokens-per-minute bucket takes the call's guessed tokens
(`Call.guess`, the guess the budget uses too), the reply at its cap.
Each attempt then waits out the endpoint's pause and takes its turn in the request and
token buckets, holds one of its concurrency slots while it is sent (the limiter's own:
a slot got as a pause began is given back first), and tells the limiter how it went: a 429 may pause
the endpoint and halve its concurrency, a success may raise it; the token bucket is
corrected with what the attempt really used (nothing, when it failed).
The time an attempt waited for its turn and slot is added to the call's `paced`.

A run without limits, or a call outside any run, has no such layer; a batched call has
none either (it is no live request).
"""

from __future__ import annotations

from ..._errors import ProviderError, RateLimitError
from ...pacing.limits import EndpointLimiter, LimitsRegistry
from ...vocab.turns import Turn
from .call import Call, Send

__all__ = ["EndpointLimits"]


class EndpointLimits:
    """Pace each attempt by the run's limiter of the call's endpoint."""

    __slots__ = ("registry",)

    def __init__(self, registry: LimitsRegistry) -> None:
        self.registry = registry

    def _limiter(self, call: Call) -> EndpointLimiter:
        """The call's limiter, found at its first attempt."""
        provider, scope = call.provider, call.scope
        limiter = call.limiter = self.registry.get(provider.endpoint, provider.rate_limits)
        if scope is not None and scope.role == "solver":
            limiter.solver_calls = True  # the run's new samples wait for this endpoint's admission
        return limiter

    async def __call__(self, call: Call, send: Send) -> Turn:
        limiter = call.limiter
        if limiter is None:
            limiter = self._limiter(call)
        estimate = call.guess.total if limiter.tokens is not None else 0
        clock = limiter.clock
        began = clock.now()
        await limiter.wait_turn(estimate)
        try:
            slots = await limiter.acquire_slot()
            paced = clock.now() - began
            call.paced += paced
            scope = call.scope
            if scope is not None and scope.limits is not None:
                scope.limits.waited(paced)  # not working time
            try:
                turn = await send(call)
            finally:
                slots.release()
        except ProviderError as exc:
            limiter.reconcile(estimate, 0)  # a failed attempt is not charged
            if isinstance(exc, RateLimitError):
                limiter.on_rate_limited(exc.retry_after)
            raise
        limiter.on_success()
        limiter.reconcile(estimate, estimate if turn.tokens is None else turn.tokens.total)
        return turn
