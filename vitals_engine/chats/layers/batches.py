"""Batch mode: the run's batch queues (`batching/queues.py`) as the call path meets them.

Two places in a stack, one job:

- `ResumedBatches`, a layer above the seats, in the stacks of models that do not go in
  batches, in a run that resumed one whose batches are still to be read: a call one of
  those batches answered takes that reply (paid for already) and goes no further; any
  other is sent on. Present only while the run has such batches to read.
- `BatchQueue`, the bottom of a model's stack in batch mode (under the retries, instead
  of the endpoint's limits and the provider's send): the call waits in its endpoint's
  queue and goes in a provider batch. A batched call is no live request: the endpoint's
  live limits do not apply to it, and no attempt timeout (a batch may take hours).

While it waits on a batch, the sample lends its seat (`Seat.lent_while`).
"""

from __future__ import annotations

from ...pacing.batch_mode import BatchCalls, Caller
from ...pacing.scope import CallScope
from ...vocab.turns import Turn
from .call import Call, Send

__all__ = ["BatchQueue", "ResumedBatches"]


def _caller(scope: CallScope | None) -> Caller | None:
    """Who makes the call: (sample id, epoch, role), when a sample's stage does."""
    if scope is None or scope.sample is None:
        return None
    return (scope.sample[0], scope.sample[1], scope.role)


class ResumedBatches:
    """Answer a call from the batches of the run this one resumed, if one answered it."""

    __slots__ = ("batches",)

    def __init__(self, batches: BatchCalls) -> None:
        self.batches = batches

    async def __call__(self, call: Call, send: Send) -> Turn:
        batches = self.batches
        if batches.resumed:  # a batch the run it resumes sent may hold this call's reply
            taken = await self._answered(call)
            if taken is not None:
                turn, call.batch_id = taken
                return turn
        return await send(call)

    async def _answered(self, call: Call) -> tuple[Turn, str] | None:
        """The reply a batch of the resumed run gave this call, if one did; the sample lends
        its seat while that batch is asked about."""
        scope = call.scope
        caller = _caller(scope)
        if caller is None:
            return None
        batches, provider, request = self.batches, call.provider, call.request
        seat = scope.seat if scope is not None else None
        if seat is None:
            return await batches.answered(provider, request, caller)
        return await seat.lent_while(lambda: batches.answered(provider, request, caller))


class BatchQueue:
    """The bottom of a batched model's stack: send the call in a provider batch."""

    __slots__ = ("batches",)

    def __init__(self, batches: BatchCalls) -> None:
        self.batches = batches

    async def __call__(self, call: Call) -> Turn:
        batches, provider, request, scope = self.batches, call.provider, call.request, call.scope
        caller = _caller(scope)
        seat = scope.seat if scope is not None else None
        if seat is None:
            turn, call.batch_id = await batches.call(provider, request, caller)
        else:
            turn, call.batch_id = await seat.lent_while(
                lambda: batches.call(provider, request, caller)
            )
        return turn
