"""A credential that expires, loaded again before it does.

A platform's credential (an access token, a set of temporary AWS keys) is loaded by its
library's blocking code: `RefreshingCredential` runs that in a worker thread, at most one
load at a time whatever the event loop (a chat is shared by runs on asyncio and trio), and
keeps the result until `margin` seconds before it expires. A call therefore never goes out
with a credential about to lapse, and a ten-hour run loads a fresh one as the old one
nears its end, not after a request has failed.

Example:
    >>> def load():
    ...     token = fetch_token()                    # the library's blocking call
    ...     return token.value, token.expires_at     # epoch seconds, or None: never
    >>> token = RefreshingCredential(load, what="the Vertex AI access token")
    >>> value = await token.get()
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

import anyio.to_thread

__all__ = ["DEFAULT_MARGIN", "RefreshingCredential"]

T = TypeVar("T")

#: Seconds before its expiry that a credential is loaded again: longer than any one request
#: takes to be signed and sent, shorter than the hour the platforms' tokens last.
DEFAULT_MARGIN = 300.0


class RefreshingCredential(Generic[T]):
    """A credential kept until `margin` seconds before it expires, then loaded again.

    `load()` is blocking and returns (the credential, its expiry in epoch seconds or None
    for one that never expires); it raises what its library raises. `clock` gives epoch
    seconds (a test moves it).
    """

    def __init__(
        self,
        load: Callable[[], tuple[T, float | None]],
        *,
        what: str,
        margin: float = DEFAULT_MARGIN,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._load = load
        self.what = what
        self.margin = margin
        self.clock = clock
        self._value: T | None = None
        self._expires: float | None = None
        self._loaded = False
        self._lock = threading.Lock()
        #: How many times the credential was loaded.
        self.loads = 0

    def fresh(self) -> T | None:
        """The credential if it is loaded and not within `margin` of its expiry, else None
        (no I/O: a caller on the event loop asks this first)."""
        if not self._loaded or self._stale():
            return None
        return self._value

    def _stale(self) -> bool:
        return self._expires is not None and self.clock() >= self._expires - self.margin

    @property
    def expires_at(self) -> float | None:
        """When the credential held expires (epoch seconds; None: never, or none held)."""
        return self._expires

    async def get(self) -> T:
        """The credential, loaded first in a worker thread when none is fresh."""
        value = self.fresh()
        if value is not None:
            return value
        return await anyio.to_thread.run_sync(self.get_blocking)

    def get_blocking(self) -> T:
        """`get()` for code that may block: loads in this thread when none is fresh."""
        with self._lock:  # one load at a time: the others wait, then take its result
            if not self._loaded or self._stale():
                value, expires = self._load()
                self._value, self._expires, self._loaded = value, expires, True
                self.loads += 1
            assert self._value is not None
            return self._value

    def invalidate(self) -> None:
        """Forget the credential: the next `get()` loads it again (after the platform
        refused it, say)."""
        with self._lock:
            self._loaded = False
