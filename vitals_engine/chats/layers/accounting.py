"""Accounting: what a call cost, and its record. The one place either is written.

Below the cache, the layer prices the reply that comes back (`cost_of`, at the batch
price when a batch answered it, at the tier the provider says served it), stamps the
turn with its cost and retries, and records the call in the current scope:

- the run's usage ledger and the sample's, under the scope's role (solver or scorer),
  so cost by role and model is exact;
- the sample's list of model calls (timing, retries, the batch, the cache, the call's
  settings), which the log turns into model events.

The cache's hits (`from_cache`: cost 0, recorded as read), the calls the retries gave
up on (`failed`: recorded with their error) and the attempts that timed out after their
request went out (`lost`: charged at once, in the ledgers only, the input tokens of the
request as estimated, at the model's input price; a provider bills what it processed
whether or not we waited for it) are written here as well. Outside any run (no scope)
a reply is priced and nothing is recorded.
"""

from __future__ import annotations

import time

import msgspec

from ..._errors import ProviderError
from ...caching.store import CachedReply
from ...pacing.scope import CallScope
from ...pricing.cost import cost_of
from ...providers.base import Provider
from ...vocab.model_calls import ModelCall
from ...vocab.turns import TokenUsage, Turn
from .call import Call, Send

__all__ = ["Accounting"]


class Accounting:
    """Price each reply and record each call in its scope."""

    __slots__ = ()

    async def __call__(self, call: Call, send: Send) -> Turn:
        turn = await send(call)
        provider = call.provider
        tokens = turn.tokens or TokenUsage()
        batch_id = call.batch_id
        cost = cost_of(
            provider.name,
            provider.price_model(turn.model),
            tokens,
            batch=batch_id is not None,
            tier=turn.service_tier,
        )
        turn = msgspec.structs.replace(turn, cost=cost, retries=len(call.notes))
        scope = call.scope
        if scope is not None:
            request, now = call.request, time.time()
            record = ModelCall(
                scope.role, provider.model_id, request, turn, call.started or now, now,
                call.notes, batch=batch_id, cache=call.cache,
                config=provider.call_config(request) or None,
            )  # fmt: skip
            _charge(scope, provider, record, cost, batch=batch_id is not None)
        return turn

    def from_cache(self, call: Call, hit: CachedReply) -> Turn:
        """The cached reply as this call's turn: at cost 0, recorded as read from the cache."""
        turn = msgspec.structs.replace(hit.turn, cost=0.0, retries=0)
        scope = call.scope
        if scope is not None:
            provider, request, now = call.provider, call.request, time.time()
            record = ModelCall(
                scope.role, provider.model_id, request, turn, now, now,
                cache="read", cached_from=hit.origin, config=provider.call_config(request) or None,
            )  # fmt: skip
            _charge(scope, provider, record, 0.0, cached=True)
        return turn

    def lost(self, call: Call) -> None:
        """An attempt of `call` that timed out after its request went out: its input tokens
        (estimated from the request) charged to the scope's ledgers as a timed-out attempt."""
        scope = call.scope
        if scope is None:
            return
        provider = call.provider
        tokens = TokenUsage(input=call.guess.prompt)
        cost = cost_of(provider.name, provider.price_model(), tokens)
        for ledger in scope.ledgers:
            ledger.record(scope.role, provider.name, provider.model, tokens, cost, timed_out=True)

    def failed(self, call: Call, error: ProviderError) -> None:
        """A call the retries gave up on: recorded with its error in the sample's calls."""
        scope = call.scope
        if scope is not None and scope.calls is not None:
            scope.calls.append(
                ModelCall(
                    scope.role,
                    call.provider.model_id,
                    call.request,
                    None,
                    call.started or time.time(),
                    time.time(),
                    call.notes,
                    error=str(error),
                )
            )


def _charge(
    scope: CallScope,
    provider: Provider,
    record: ModelCall,
    cost: float | None,
    *,
    batch: bool = False,
    cached: bool = False,
) -> None:
    """Charge a completed call to the scope's ledgers and add it to the sample's calls."""
    tokens = (record.reply.tokens if record.reply is not None else None) or TokenUsage()
    for ledger in scope.ledgers:
        ledger.record(
            scope.role, provider.name, provider.model, tokens, cost, batch=batch, cached=cached
        )
    if scope.calls is not None:
        scope.calls.append(record)
