"""Seats: the sample's count of model calls in progress, around all of a call's attempts.

A sample waiting out a retry or a batch lends its seat to another sample, but only
while the call waiting is its only one in progress (`pacing/seats.py`): a solver
running calls side by side keeps its seat. This layer keeps that count (`Seat.calls`)
from before the first attempt until the call is answered or given up; the waits that
lend the seat are the retries' and the batch queue's.
"""

from __future__ import annotations

from ...vocab.turns import Turn
from .call import Call, Send

__all__ = ["SeatCount"]


class SeatCount:
    """Count the call among its sample's calls in progress while it is under way."""

    __slots__ = ()

    async def __call__(self, call: Call, send: Send) -> Turn:
        scope = call.scope
        seat = scope.seat if scope is not None else None
        if seat is None:  # not a worker's sample (a whole-dataset stage, a scope of one's own)
            return await send(call)
        seat.calls += 1
        try:
            return await send(call)
        finally:
            seat.calls -= 1
