"""The cache as the call path uses it: which options apply to a call, its key, a hit,
and keeping a fresh reply.

A run makes one `CacheUse` (its default options, its task and log for the origin of
what it stores, its hits and misses); the call scope carries it. A model's own
`cache=` wins over the run's: a `Cache` of its own, or False for never. A chat with
`cache=` used outside any run shares one use per process.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ..config import cache_dir_from_env
from ..vocab.model_calls import ChatRequest, ReplyOrigin
from ..vocab.turns import Turn
from .keys import repeated, reply_key
from .options import Cache
from .store import CachedReply, ReplyStore, open_store

__all__ = ["CacheEntry", "CacheUse", "cache_entry"]


class CacheUse:
    """One run's use of the cache: its options, whose replies it stores, its counts.

    Example:
        >>> use = CacheUse(Cache(), task="arithmetic", log="2026-...json")
        >>> use.hits, use.misses
        (0, 0)
    """

    __slots__ = ("_opened", "default", "hits", "log", "misses", "task")

    def __init__(
        self, default: Cache | None = None, *, task: str | None = None, log: str | None = None
    ) -> None:
        self.default = default
        self.task = task
        self.log = log
        #: Calls the cache answered, and calls it could have but did not (sent, then kept).
        self.hits = 0
        self.misses = 0
        #: Per options (and VITALS_CACHE_DIR), the store and its max age: a path is
        #: resolved and an age parsed once, not at every call.
        self._opened: dict[tuple[Cache, str | None], tuple[ReplyStore | None, float | None]] = {}

    def opened(self, options: Cache) -> tuple[ReplyStore | None, float | None]:
        """The store `options` name (None: it cannot be opened) and their max age."""
        # the variable decides the path only when the options give no dir
        at = (options, cache_dir_from_env() if options.dir is None else None)
        found = self._opened.get(at)
        if found is None:
            found = self._opened[at] = (open_store(options.path), options.max_age)
        return found

    def options(self, own: Cache | bool | None) -> Cache | None:
        """The options for a model whose own `cache=` is `own`."""
        if own is False:
            return None
        if isinstance(own, Cache):
            return own
        return self.default


#: The use of chats with `cache=` called outside any run.
_OUTSIDE = CacheUse()


@dataclass(slots=True)
class CacheEntry:
    """One call's place in the cache: where, under which key, for which use."""

    store: ReplyStore
    key: str
    max_age: float | None
    use: CacheUse
    provider: str
    base_url: str
    model: str

    def hit(self) -> CachedReply | None:
        """The stored reply, if there is one still fresh; counts a hit or a miss."""
        found = self.store.get(self.key, max_age=self.max_age)
        if found is None:
            self.use.misses += 1
        else:
            self.use.hits += 1
        return found

    def keep(self, turn: Turn, sample: tuple[int | str, int] | None, role: str | None) -> None:
        """Store a fresh reply, with the call it answered."""
        origin = ReplyOrigin(
            task=self.use.task,
            log=self.use.log,
            sample=sample[0] if sample is not None else None,
            epoch=sample[1] if sample is not None else None,
            role=role,
            at=time.time(),
        )
        self.store.put(self.key, self.provider, self.base_url, self.model, turn, origin)


def cache_entry(
    use: CacheUse | None,
    own: Cache | bool | None,
    *,
    provider: str,
    base_url: str,
    model: str,
    model_params: dict[str, Any],
    request: ChatRequest,
    epoch: int,
    seen: dict[str, int] | None,
) -> CacheEntry | None:
    """The call's cache entry, or None when no cache applies (or the store cannot be
    opened). `seen` counts the identical calls made so far in the sample stage."""
    if use is None:
        if own is None or own is False:
            return None
        use = _OUTSIDE
    options = use.options(own)
    if options is None:
        return None
    store, max_age = use.opened(options)
    if store is None:
        return None
    key = reply_key(provider, base_url, model, request, model_params=model_params, epoch=epoch)
    if seen is not None:
        nth = seen.get(key, 0)
        seen[key] = nth + 1
        key = repeated(key, nth)
    return CacheEntry(store, key, max_age, use, provider, base_url, model)
