"""Batch mode: model calls sent in the providers' batch APIs, at half the price, answered
later. `Batch` says how calls are grouped and how often a batch is asked about;
`BatchCalls` is what the call path needs of the run's batch queues (made by the engine,
found in the call scope).

A call in batch mode waits in its endpoint's queue instead of going out alone. A queue
is submitted when it holds `size` requests (or as many as the provider takes in one
batch), or `wait` seconds after its first request; it is then asked about every `poll`
seconds (less often the longer it runs) until it has ended, and each call gets its own
result, as a live call would.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

from .._errors import ConfigError
from ..vocab.model_calls import ChatRequest
from ..vocab.turns import Turn

__all__ = ["Batch", "BatchCalls", "Caller", "batch_option"]

#: Who makes a call: (sample id, epoch, role). A batch's journal records it per request,
#: so a resumed run knows its own calls among the requests an earlier run sent.
Caller = tuple[int | str, int, str]


@dataclass(frozen=True, slots=True)
class Batch:
    """How model calls go in provider batches: `task.eval(batch=Batch(size=10_000))`.

    Args:
        size: requests per batch at most (a provider's own cap may be lower).
        wait: seconds a batch waits for more requests after its first one.
        poll: seconds between two asks about a submitted batch, at first (the wait
            grows to ten times this for a batch that runs long).
        max_pending: samples that may wait on batches at once (default: two full
            batches); memory grows with it, not with the dataset.
        cancel_batches: what a run that ends early (Ctrl-C, an error that stops it) does
            with the batches it submitted and that have not ended: True or None (the
            default) asks their providers to cancel them, False leaves them running.

    Example:
        >>> task.eval(batch=Batch(size=10_000, wait=60, poll=30))
    """

    size: int = 10_000
    wait: float = 60.0
    poll: float = 30.0
    max_pending: int | None = None
    cancel_batches: bool | None = None

    def __post_init__(self) -> None:
        for name in ("size", "max_pending"):
            value = getattr(self, name)
            if value is None and name == "max_pending":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"Batch({name}={value!r}) must be a whole number of at least 1.")
        for name in ("wait", "poll"):
            value = getattr(self, name)
            if not _seconds(value):
                raise ConfigError(
                    f"Batch({name}={value!r}) must be a finite number of seconds, 0 or more."
                )
        if self.cancel_batches not in (True, False, None):
            raise ConfigError(
                f"Batch(cancel_batches={self.cancel_batches!r}) must be True, False or None."
            )

    @property
    def pending(self) -> int:
        """How many samples may wait on batches at once."""
        return self.max_pending if self.max_pending is not None else 2 * self.size


def _seconds(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < math.inf


def batch_option(value: Batch | bool | None, who: str) -> Batch | None:
    """A `batch=` argument as `Batch` options (None: live calls).

    Example:
        >>> batch_option(True, "eval()")
        Batch(size=10000, wait=60.0, poll=30.0, max_pending=None, cancel_batches=None)
    """
    if value is None or value is False:
        return None
    if value is True:
        return Batch()
    if isinstance(value, Batch):
        return value
    raise ConfigError(f"{who}: batch= must be True, False, None or a ve.Batch(...), not {value!r}.")


class BatchCalls(Protocol):
    """The run's batch queues, as the call path sees them."""

    @property
    def resumed(self) -> bool:
        """Whether the run knows batches an earlier run of its samples sent (it resumed one)."""
        ...

    def takes(self, provider: Any) -> bool:
        """Whether `provider`'s calls go in batches in this run."""
        ...

    async def answered(
        self, provider: Any, request: ChatRequest, caller: Caller | None
    ) -> tuple[Turn, str] | None:
        """The reply (and its batch's id) a batch an earlier run of these samples sent gave
        this very call, if one did; None: the call goes out."""
        ...

    async def call(
        self, provider: Any, request: ChatRequest, caller: Caller | None = None
    ) -> tuple[Turn, str]:
        """Send `request` in a batch (or take its outcome from a batch an earlier run of
        the same samples sent) and return its reply and the batch's id (raising a
        `ProviderError` for a request the batch failed, as a live call would)."""
        ...
