"""The reply cache, the first layer a call meets (with the run's `cache=` or the model's).

A hit answers the call at once: no budget, no batch, no seat, no rate limit, no slot;
`answer` (the accounting's) makes the cached reply this call's turn at cost 0 and records
it as read from the cache. A miss is sent on, and its reply (priced, below) is kept.
Errors are never kept. Which options apply, the key and the store: `caching/lookup.py`.
"""

from __future__ import annotations

from collections.abc import Callable

from ...caching.lookup import CacheEntry, CacheUse, cache_entry
from ...caching.store import CachedReply
from ...vocab.turns import Turn
from .call import Call, Send

__all__ = ["ReplyCache", "caches"]


def caches(use: CacheUse | None, own: object) -> bool:
    """Whether a model whose own `cache=` is `own` may use the cache in a run using `use`
    (None: outside any run)."""
    return own is not False and (own is not None or (use is not None and use.default is not None))


class ReplyCache:
    """Answer a call from the cache, or send it on and keep its reply."""

    __slots__ = ("answer", "use")

    def __init__(self, use: CacheUse | None, answer: Callable[[Call, CachedReply], Turn]) -> None:
        self.use = use
        self.answer = answer

    async def __call__(self, call: Call, send: Send) -> Turn:
        entry = self._entry(call)
        if entry is None:  # the store cannot be opened
            return await send(call)
        hit = entry.hit()
        if hit is not None:
            call.cache = "read"
            return self.answer(call, hit)
        call.cache = "write"
        turn = await send(call)
        scope = call.scope
        if scope is None:
            entry.keep(turn, None, None)
        else:
            entry.keep(turn, scope.sample, scope.role)
        return turn

    def _entry(self, call: Call) -> CacheEntry | None:
        provider, scope = call.provider, call.scope
        seen = None
        if scope is not None:
            seen = scope.cache_seen
            if seen is None:
                seen = scope.cache_seen = {}
        return cache_entry(
            self.use,
            provider.cache,
            provider=provider.name,
            base_url=provider.base_url,
            model=provider.model,
            model_params=provider.reply_params,
            request=call.request,
            epoch=scope.sample[1] if scope is not None and scope.sample is not None else 1,
            seen=seen,
        )
