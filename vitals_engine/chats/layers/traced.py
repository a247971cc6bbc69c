"""Tracing: each model call as a span of the application's OpenTelemetry, the first
layer a call meets (in the stacks of a traced run only).

The span (`tracing/spans.py`, GenAI conventions) starts before the cache, so a hit is
a span too (`vitals.cache.hit`, cost 0), and ends when the reply (priced, below) or the
error comes back up: each retry an event with its reason and wait, the time the attempts
waited for the endpoint's rate limits, the provider batch that answered and how long
it took, the call's tokens and cost, and its metrics. It is current while the call is
under way, so what is logged meanwhile carries its ids.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...vocab.turns import Turn
from .call import Call, Send

if TYPE_CHECKING:
    from ...tracing.spans import RunTrace

__all__ = ["Traced"]


class Traced:
    """Wrap each call in a span of the run's trace.

    Example:
        >>> stack = Stack([Traced(trace), Accounting(), Retries(Retry(), clock, gave_up)], send)
        >>> turn = await stack.send(Call(provider, request, scope))   # one span, ended
    """

    __slots__ = ("trace",)

    def __init__(self, trace: RunTrace) -> None:
        self.trace = trace

    async def __call__(self, call: Call, send: Send) -> Turn:
        provider, scope = call.provider, call.scope
        role = scope.role if scope is not None else None
        with self.trace.model_call(
            provider.name, provider.model, role, call.request, call.notes
        ) as span:
            turn = await send(call)
            span.replied(
                turn, cache=call.cache, batch_id=call.batch_id, waited=call.paced, sent=call.started
            )
        return turn
