"""One model call: the single place every request of every chat goes through.

It prices the reply and records it in the usage scope of the running sample
stage (see `usage.py`), so cost by role and model is exact.
"""

from __future__ import annotations

import msgspec

from ..providers.base import ChatRequest, Provider
from .pricing import cost_of
from .turns import TokenUsage, Turn
from .usage import current_scope

__all__ = ["call_model"]


async def call_model(provider: Provider, request: ChatRequest) -> Turn:
    """Send `request` to `provider` and return the priced assistant turn."""
    turn = await provider.generate(request)
    tokens = turn.tokens or TokenUsage()
    cost = cost_of(provider.name, turn.model or provider.model, tokens)
    turn = msgspec.structs.replace(turn, cost=cost)
    scope = current_scope()
    if scope is not None:
        scope.record(provider.name, provider.model, tokens, cost)
    return turn
